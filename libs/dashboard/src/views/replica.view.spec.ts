import { replicaView } from './replica.view.js';

describe('replicaView', () => {
  it('says nothing when the pages read the primary by configuration', () => {
    expect(replicaView(null)).toBe('');
    expect(replicaView(undefined)).toBe('');
  });

  it('says caught up, or how far behind, even by less than a second', () => {
    expect(replicaView({ readingFrom: 'replica', caughtUp: true, lagSeconds: 0 })).toContain('>Read from the replica, caught up.<');
    expect(replicaView({ readingFrom: 'replica', caughtUp: false, lagSeconds: 0.25 })).toContain('>Read from the replica, 250 ms behind the primary.<');
    expect(replicaView({ readingFrom: 'replica', caughtUp: false, lagSeconds: 192 })).toContain('>Read from the replica, 3 min 12 s behind the primary.<');
    expect(replicaView({ readingFrom: 'replica', caughtUp: false, lagSeconds: null })).toContain('behind the primary by an unknown time');
  });

  it('says the page read the primary, and why, while the replica does not answer', () => {
    const html = replicaView({ readingFrom: 'primary', caughtUp: false, lagSeconds: null, error: 'connect ECONNREFUSED <1>' });
    expect(html).toBe(
      '<p class="replica bad" data-reading-from="primary">The replica does not answer (connect ECONNREFUSED &lt;1&gt;): this page reads the primary.</p>',
    );
  });
});
