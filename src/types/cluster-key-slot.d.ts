/** `cluster-key-slot` (the Redis Cluster key slot, CRC16 of the hash tag, mod 16384). */
declare module 'cluster-key-slot' {
  /** The slot (0–16383) of a key, honouring `{hash tags}`. */
  export default function calculateSlot(key: string | Buffer): number;
}
