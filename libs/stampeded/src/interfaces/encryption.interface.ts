/**
 * The keys that encrypt the args and results of the tasks and queues that
 * ask for it (`encrypt: true`), AES-256-GCM. docs/encryption.md.
 *
 * @example
 * encryption: {
 *   keys: { k2: process.env.JOBS_KEY_2!, k1: process.env.JOBS_KEY_1! },
 *   current: 'k2',
 * }
 */
export interface EncryptionOptions {
  /**
   * Every key a stored job may be encrypted with, by id: 32 bytes each, as a
   * Buffer (or Uint8Array) or as base64 text (`openssl rand -base64 32`). The
   * id is stored beside each ciphertext; 1 to 64 letters, digits, ".", "_",
   * ":" or "-". Keep a retired key listed until `stampeded encryption
   * rotate` has re-encrypted the jobs that use it.
   */
  keys: Record<string, string | Uint8Array>;
  /** The id of the key new args and results are encrypted with; one of `keys`. */
  current: string;
}

/** What EncryptionRotator.rotate() and `stampeded encryption rotate` do. */
export interface RotateEncryptionOptions {
  /** Jobs read and re-encrypted per statement, 1 to 5,000. Default 200. */
  batchSize?: number;
  /** Count what would change, and change nothing. */
  dryRun?: boolean;
  /** Called after each batch with the jobs re-encrypted so far. */
  onProgress?: (rotated: number) => void;
}

export interface RotateEncryptionResult {
  /** The key everything is now encrypted with. */
  current: string;
  /** Jobs whose args or result were re-encrypted (or, with dryRun, would be). */
  jobs: number;
  /** Schedules whose args were re-encrypted. */
  schedules: number;
  /**
   * Jobs left as they were because they were running (claimed or executing)
   * when their batch was written: a worker holds them. Run the command again
   * once they have finished.
   */
  running: number;
  /** Jobs and schedules under a key the command was not given, by key id: left as they were. */
  unreadable: Record<string, number>;
  /** The values (args, results, schedule args) read under each older key, by its id. */
  fromKeys: Record<string, number>;
  dryRun: boolean;
}
