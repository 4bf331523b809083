/**
 * `sluice/store`: the contract of a store — what the decision path needs from Redis (run one
 * script atomically and return its reply) — for a store of your own. Types only: it loads
 * nothing. `MemoryStore` (root entry) and the stores of every Redis client implement it.
 *
 * @packageDocumentation
 */
export type { LuaScript } from '../algorithms/script.js';
export type { ReplicaAcks, ScriptStore, ServerFacts } from './store.js';
