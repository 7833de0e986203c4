import { defineSuite } from './suite';

defineSuite('node-redis');
