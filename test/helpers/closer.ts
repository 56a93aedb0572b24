/**
 * Closes what a test opened even when the test fails before its own close() (a failed assertion
 * would otherwise leave an engine's loops, timers and database handles running and hang the run).
 * track() makes an opened thing's close() run at most once; closeAll(), from afterEach or after,
 * closes whatever is still open. Wrap plain objects such as OpenedEngine (their properties are
 * copied onto the returned object).
 */
export class Closer {
  private readonly pending = new Set<() => Promise<void>>();

  async track<T extends { close(): Promise<void> }>(opening: Promise<T> | T): Promise<T> {
    const opened = await opening;
    let closing: Promise<void> | undefined;
    const close = (): Promise<void> => {
      this.pending.delete(close);
      closing ??= opened.close();
      return closing;
    };
    this.pending.add(close);
    return { ...opened, close };
  }

  async closeAll(): Promise<void> {
    for (const close of [...this.pending]) await close();
  }
}
