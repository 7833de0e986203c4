import { defineLifecycleSuite } from './lifecycle';
import { defineSuite } from './suite';

defineSuite('node-redis');
defineLifecycleSuite('node-redis');
