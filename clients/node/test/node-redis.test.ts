import { defineFamilySuite } from './family';
import { defineLifecycleSuite } from './lifecycle';
import { defineSuite } from './suite';

defineSuite('node-redis');
defineLifecycleSuite('node-redis');
defineFamilySuite('node-redis');
