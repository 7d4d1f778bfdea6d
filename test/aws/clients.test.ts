// The AWS clients' own deadlines: a call whose answer never comes fails, it does not hang.
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { createDynamoDbClients } from '../../runtime/aws/clients.js';

describe('AWS clients', () => {
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  });

  it('ends a DynamoDB call whose endpoint accepts the connection and never answers', async () => {
    // A server that takes the request and says nothing: a hung endpoint or a lost answer.
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('data', () => undefined);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const clients = createDynamoDbClients({
      region: 'us-east-1',
      endpoint: `http://127.0.0.1:${port}`,
      credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
      maxAttempts: 1,
      requestTimeoutMs: 300,
    });
    try {
      const call = clients.documentClient.send(new GetCommand({ TableName: 't', Key: { id: 'a' } }));
      const outcome = await Promise.race([
        call.then(
          () => 'answered',
          (e: Error) => e,
        ),
        new Promise((resolve) => setTimeout(() => resolve('still waiting after 10 s'), 10_000)),
      ]);
      expect(outcome).toBeInstanceOf(Error);
      expect(sockets.size).toBeGreaterThan(0);
    } finally {
      clients.destroy();
    }
  });
});
