import { defineClusterSuite } from './cluster';

defineClusterSuite('node-redis');
