import { defineSuite } from './suite';

defineSuite('ioredis');
