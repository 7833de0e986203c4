/**
 * A TCP proxy in front of a test server, to end a client's connections in
 * ways the server cannot: a reset (RST) and garbage on the wire (a protocol
 * error in the client). Every connection through it is kept in `links`.
 */
import net from 'node:net';

export class Proxy {
  readonly links: { client: net.Socket; server: net.Socket }[] = [];

  private constructor(
    private readonly listener: net.Server,
    readonly port: number,
  ) {}

  static start(target: number): Promise<Proxy> {
    const links: Proxy['links'] = [];
    const listener = net.createServer((client) => {
      const server = net.connect(target, '127.0.0.1');
      client.pipe(server);
      server.pipe(client);
      const end = () => {
        client.destroy();
        server.destroy();
      };
      client.on('error', end);
      server.on('error', end);
      client.on('close', end);
      server.on('close', end);
      links.push({ client, server });
    });
    return new Promise((resolve) => {
      listener.listen(0, '127.0.0.1', () => {
        const p = new Proxy(listener, (listener.address() as net.AddressInfo).port);
        (p as { links: Proxy['links'] }).links = links;
        resolve(p);
      });
    });
  }

  /** Resets every client-side connection (the client reads ECONNRESET). */
  reset(): void {
    for (const { client } of this.links) client.resetAndDestroy();
  }

  /** Sends bytes that are not RESP to every client: its parser fails. */
  garbage(): void {
    for (const { client } of this.links) client.write('\x00\x01 not RESP\r\n');
  }

  stop(): void {
    for (const { client, server } of this.links) {
      client.destroy();
      server.destroy();
    }
    this.listener.close();
  }
}
