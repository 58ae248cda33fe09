// The messages of encrypted args, results and log lines, re-exported by stampeded.messages.ts: each says what was wrong and what to do.

export const INVALID_ENCRYPTION_OPTION = (where: string, problem: string) =>
  `${where}: encryption ${problem}. Give { keys: { <id>: <32-byte key, base64 or a Buffer> }, current: '<id>' }; make a key with \`openssl rand -base64 32\`.`;

export const ENCRYPTION_KEYS_REQUIRED = (what: string) =>
  `${what} has encrypt: true, but StampededModule.forRoot() has no encryption keys. Add encryption: { keys: { k1: <32-byte key, base64> }, ` +
  `current: 'k1' } (docs/encryption.md), or drop encrypt.`;

export const ENCRYPTION_KEY_UNKNOWN = (keyId: string, known: readonly string[]) =>
  `encrypted with key "${keyId}", which is not among this process's keys (${known.length ? known.join(', ') : 'it has none'}). ` +
  `Add the key under that id to encryption.keys, then retry.`;

export const ENCRYPTION_NOT_AUTHENTIC = (keyId: string, task: string) =>
  `encrypted with key "${keyId}" for task "${task}", but that key does not open it: the key listed under "${keyId}" is not the one that ` +
  `encrypted it, or the stored envelope was changed. Check the key's bytes.`;

export const ENVELOPE_UNREADABLE = (problem: string) => `an encrypted envelope this runtime cannot read: ${problem} (docs/encryption.md has the format).`;

export const ENCRYPTED_TOO_LARGE = (where: string, option: string, bytes: number, limit: number) =>
  `${where}: ${option} is ${bytes} bytes once encrypted (base64 adds a third), over the ${limit}-byte limit; store large payloads elsewhere and pass a reference.`;

export const ENCRYPTED_ARGS_UNREADABLE = (task: string, problem: string) =>
  `the args of task "${task}" are ${problem} The job was discarded without running its handler.`;

export const INVALID_ENCRYPTED_ARGS_AT_RUN = (task: string, issues: number) =>
  `the args of task "${task}" fail its validate option (${issues} issue(s), not recorded here because the task's args are encrypted: ` +
  `check them with the validate option in a process that holds the key). The job was discarded without running its handler.`;
