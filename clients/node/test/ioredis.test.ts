import { defineFamilySuite } from './family';
import { defineLifecycleSuite } from './lifecycle';
import { defineSuite } from './suite';

defineSuite('ioredis');
defineLifecycleSuite('ioredis');
defineFamilySuite('ioredis');
