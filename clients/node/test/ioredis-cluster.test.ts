import { defineClusterSuite } from './cluster';

defineClusterSuite('ioredis');
