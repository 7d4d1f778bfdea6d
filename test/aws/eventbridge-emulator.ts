// A small EventBridge emulator for the AWS tests: the PutEvents call of the EventBridge API (JSON 1.1,
// `X-Amz-Target: AWSEvents.PutEvents`), on the buses it was started with, delivering each event as a
// rule's target receives it (the EventBridge event envelope, detail parsed), asynchronously, to the
// listener a test sets. Entries EventBridge would refuse (an unknown bus, a detail that is not a JSON
// object, a missing source or detail type) are answered as failed entries, as EventBridge answers them.
// Test infrastructure: requests are not authenticated.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const TARGET = 'AWSEvents.PutEvents';

/** An event as a rule's target receives it. */
export interface DeliveredEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': string;
  readonly source: string;
  readonly account: string;
  readonly time: string;
  readonly region: string;
  readonly resources: readonly string[];
  readonly detail: unknown;
  /** Which bus it was put on (not part of the envelope; for assertions). */
  readonly bus: string;
}

interface PutEventsEntry {
  readonly EventBusName?: string;
  readonly Source?: string;
  readonly DetailType?: string;
  readonly Detail?: string;
  readonly Resources?: string[];
}

export class EventBridgeEmulator {
  readonly endpoint: string;
  /** Every event taken, in order. */
  readonly events: DeliveredEvent[] = [];
  private listener: ((event: DeliveredEvent) => void) | undefined;

  private constructor(
    private readonly server: Server,
    port: number,
    private readonly buses: ReadonlySet<string>,
    private readonly region: string,
  ) {
    this.endpoint = `http://127.0.0.1:${port}`;
  }

  static async start(options: { buses: readonly string[]; region?: string }): Promise<EventBridgeEmulator> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const emulator = new EventBridgeEmulator(server, (server.address() as AddressInfo).port, new Set(options.buses), options.region ?? 'us-east-1');
    server.on('request', (req, res) => void emulator.onRequest(req, res));
    return emulator;
  }

  /** Where the events go, as a rule on their bus would send them; undefined: nowhere (they are still recorded). */
  onEvent(listener: ((event: DeliveredEvent) => void) | undefined): void {
    this.listener = listener;
  }

  async close(): Promise<void> {
    this.listener = undefined;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const target = String(req.headers['x-amz-target'] ?? '');
    if (req.method !== 'POST' || target !== TARGET) {
      this.reply(res, 400, {
        __type: 'UnknownOperationException',
        message: `the emulator implements only POST with X-Amz-Target ${TARGET}, found ${req.method} '${target}'`,
      });
      return;
    }
    let input: { Entries?: PutEventsEntry[] };
    try {
      input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { Entries?: PutEventsEntry[] };
    } catch (error) {
      this.reply(res, 400, { __type: 'SerializationException', message: (error as Error).message });
      return;
    }
    const entries = input.Entries ?? [];
    if (entries.length < 1 || entries.length > 10) {
      this.reply(res, 400, { __type: 'ValidationException', message: `PutEvents takes 1 to 10 entries, found ${entries.length}` });
      return;
    }
    const answers = entries.map((entry) => this.put(entry));
    this.reply(res, 200, { FailedEntryCount: answers.filter((a) => 'ErrorCode' in a).length, Entries: answers });
  }

  private put(entry: PutEventsEntry): { EventId: string } | { ErrorCode: string; ErrorMessage: string } {
    const bus = entry.EventBusName ?? 'default';
    if (!this.buses.has(bus)) return { ErrorCode: 'ResourceNotFoundException', ErrorMessage: `Event bus ${bus} does not exist.` };
    if (!entry.Source || !entry.DetailType) return { ErrorCode: 'InvalidArgument', ErrorMessage: 'Parameters Source and DetailType are required.' };
    let detail: unknown;
    try {
      detail = JSON.parse(entry.Detail ?? '{}');
    } catch {
      return { ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' };
    }
    if (detail === null || typeof detail !== 'object' || Array.isArray(detail)) return { ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' };
    const event: DeliveredEvent = {
      version: '0',
      id: randomUUID(),
      'detail-type': entry.DetailType,
      source: entry.Source,
      account: '000000000000',
      time: new Date().toISOString(),
      region: this.region,
      resources: entry.Resources ?? [],
      detail,
      bus,
    };
    this.events.push(event);
    // A rule's target hears it after the call was answered, as EventBridge delivers.
    setImmediate(() => this.listener?.(event));
    return { EventId: event.id };
  }

  private reply(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    if (status !== 200) res.setHeader('x-amzn-errortype', (body as { __type: string }).__type);
    res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'content-length': Buffer.byteLength(text), 'x-amzn-requestid': randomUUID() });
    res.end(text);
  }
}
