export default async function globalTeardown() {
  await globalThis.__stampededServer?.stop();
}
