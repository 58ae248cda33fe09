import { randomFillSync } from 'node:crypto';

/**
 * Job ids for the plain enqueue, drawn in the process: UUID version 7 (RFC
 * 9562), a 48-bit Unix millisecond timestamp, then a 12-bit counter (the
 * RFC's "fixed-length dedicated counter", method 1) and 62 random bits.
 *
 * The database would draw the same kind of id (the column's DEFAULT
 * uuidv7()), but then the statement has to hand every id back matched to
 * its input row: a materialised copy of the batch and one result row per
 * job (NOTES.md, "The enqueue's ids"). An id known before the insert needs
 * neither.
 *
 * Within this process the ids only grow: a counter orders those of one
 * millisecond, and when it runs out (4,096 ids in a millisecond, which a
 * bulk enqueue reaches) the timestamp field moves on by one, as the RFC
 * allows. Across processes they are ordered by their clocks, as the
 * database's own are by its clock.
 */
export class UuidV7Source {
  private lastMs = -1;
  private counter = 0;
  /** "tttttttt-tttt-7" for lastMs. */
  private prefix = '';
  /** Random hex digits not handed out yet, from randomAt on. */
  private random = '';
  private randomAt = 0;

  constructor(private readonly clock: () => number = Date.now) {}

  /** n ids, each greater than the one before. */
  many(n: number): string[] {
    const { random, at } = this.randomHex(n * 16);
    const ids = new Array<string>(n);
    for (let i = 0; i < n; i++) {
      // The clock is read once a batch: the ids after the first follow by the counter.
      if (i === 0) this.tick();
      else this.step();
      const r = at + i * 16;
      // 62 random bits behind the RFC variant (binary 10).
      ids[i] = this.prefix + HEX3[this.counter] + '-' + VARIANT[random.charCodeAt(r)] + random.slice(r + 1, r + 4) + '-' + random.slice(r + 4, r + 16);
    }
    return ids;
  }

  /**
   * `chars` hex digits from the CSPRNG, at `at` in `random`. Drawn in
   * blocks: a draw of 8 bytes costs about what one of 4 KB does, and an id's
   * share of a block costs far less than crypto.randomUUID() per id
   * (NOTES.md, "The enqueue's ids").
   */
  private randomHex(chars: number): { random: string; at: number } {
    if (chars > RANDOM_BLOCK_BYTES * 2) return { random: randomFillSync(Buffer.allocUnsafe(chars / 2)).toString('hex'), at: 0 };
    if (this.randomAt + chars > this.random.length) {
      this.random = randomFillSync(Buffer.allocUnsafe(RANDOM_BLOCK_BYTES)).toString('hex');
      this.randomAt = 0;
    }
    const at = this.randomAt;
    this.randomAt += chars;
    return { random: this.random, at };
  }

  private tick(): void {
    const now = this.clock();
    if (now > this.lastMs) {
      this.setTime(now);
      this.counter = Math.floor(Math.random() * 0x100); // a random start, with room below 4,096
    } else this.step();
  }

  private step(): void {
    if (++this.counter > 0xfff) {
      this.setTime(this.lastMs + 1);
      this.counter = 0;
    }
  }

  private setTime(ms: number): void {
    this.lastMs = ms;
    const hex = ms.toString(16).padStart(12, '0');
    this.prefix = `${hex.slice(0, 8)}-${hex.slice(8)}-7`;
  }
}

const RANDOM_BLOCK_BYTES = 4096;
const HEX3 = Array.from({ length: 0x1000 }, (_, i) => i.toString(16).padStart(3, '0'));
/** A hex digit's character code to the variant digit that keeps its low two bits. */
const VARIANT: string[] = [];
for (const digit of '0123456789abcdef') VARIANT[digit.charCodeAt(0)] = (8 | (parseInt(digit, 16) & 3)).toString(16);
