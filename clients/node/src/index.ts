export { Lock, type AcquireOptions, type Held, type LockOptions } from './lock';
export {
  HashlockError,
  LockLostError,
  LockTimeoutError,
  NoReplicasError,
  NotLockError,
  NotOwnerError,
  WrongTypeError,
} from './errors';
export { DEFAULT_LEASE_MS, parseInfo, type LockInfo } from './protocol';
export { adapt, fromIoredis, fromNodeRedis, type Adapter, type Connection } from './adapters';
