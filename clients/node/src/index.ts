export { Lock, type AcquireOptions, type Held, type LockOptions } from './lock';
export {
  Election,
  Latch,
  Lease,
  MultiLock,
  Observer,
  ReadHold,
  ReadWriteLock,
  Semaphore,
  WriteHold,
  type ElectionOptions,
  type Leader,
  type LeaderChange,
  type RWLockInfo,
  type SemaphoreInfo,
} from './family';
export { type TenureOptions, type WaitOptions } from './tenure';
export { hearsLifecycleEvents } from './events';
export {
  CrossSlotError,
  EventsDisabledError,
  NoUpgradeError,
  NotLatchError,
  NotSemaphoreError,
  HashlockError,
  LockLostError,
  LockTimeoutError,
  ModuleNotLoadedError,
  NoReplicasError,
  NotLockError,
  NotOwnerError,
  WrongTypeError,
} from './errors';
export { DEFAULT_LEASE_MS, parseInfo, type LockInfo } from './protocol';
export { adapt, fromIoredis, fromIoredisCluster, fromNodeRedis, fromNodeRedisCluster, type Adapter, type Address, type Connection } from './adapters';
export { closeIdleConnections, ConnectionPool, Dedicated, poolFor } from './pool';
export { Watch, type WatchOptions } from './watch';
export { keySlot } from './slot';
