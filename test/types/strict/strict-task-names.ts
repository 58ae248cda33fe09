// Type-level tests of `strictTaskNames`: compiled by `npm run typecheck` in a
// program of its own (test/types/strict/tsconfig.json), since the switch
// holds for every file of a program. Never run.
import type { Queue, QueueService, RegisteredTaskName } from '@stampeded/nestjs';

declare module '@stampeded/nestjs' {
  interface StampededTasks {
    'strict:send-email': { to: string };
    'strict:tick': Record<string, never>;
  }
  interface StampededTypeOptions {
    strictTaskNames: true;
  }
}

export async function strictTaskNames(queue: QueueService, emails: Queue): Promise<void> {
  await queue.enqueue('strict:send-email', { to: 'a@example.com' });
  await queue.enqueue('strict:tick', {});
  await emails.enqueue('strict:send-email', { to: 'a@example.com' });
  await queue.enqueueMany([{ task: 'strict:send-email', args: { to: 'a@example.com' } }]);

  // @ts-expect-error a misspelt name
  await queue.enqueue('strict:send-emial', { to: 'a@example.com' });
  // @ts-expect-error a name not listed
  await queue.enqueue('charge-card', { amount: 1 });
  // @ts-expect-error a name not listed, on a queue handle
  await emails.enqueue('charge-card', { amount: 1 });
  // @ts-expect-error a name not listed, in a batch
  await queue.enqueueMany([{ task: 'charge-card', args: { amount: 1 } }]);
  // @ts-expect-error any string: narrow it to RegisteredTaskName first
  await queue.enqueue('strict:send-email' as string, { to: 'a@example.com' });

  const fromConfig: string = 'strict:tick';
  if (isTaskName(fromConfig)) await queue.enqueue(fromConfig, {});
}

function isTaskName(name: string): name is RegisteredTaskName {
  return name === 'strict:send-email' || name === 'strict:tick';
}
