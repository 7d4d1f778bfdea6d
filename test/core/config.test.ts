import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_OPTIONS, configFromEnv, configToEnv, defaultConfig, loadConfig, slotHeapMiB } from '../../runtime/core/config.js';
import { ConfigurationError } from '../../runtime/core/errors.js';

describe('config', () => {
  it('takes Flink-style keys and field names, and converts numbers given as strings', () => {
    const config = loadConfig({ 'heartbeat.timeout': '20000', numberOfTaskSlots: 4 });
    expect(config.heartbeatTimeoutMs).toBe(20_000);
    expect(config.numberOfTaskSlots).toBe(4);
    expect(config.rpcTimeoutMs).toBe(defaultConfig.rpcTimeoutMs);
  });

  it('reports every problem at once, naming key, value and expectation', () => {
    let error: unknown;
    try {
      loadConfig({ 'heartbeat.timeout': 'soon', 'taskmanager.numberOfTaskSlots': 0, 'no.such.key': 1 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    const message = (error as Error).message;
    expect(message).toMatch(/'heartbeat.timeout' must be an integer, found "soon"/);
    expect(message).toMatch(/'taskmanager.numberOfTaskSlots' must be >= 1, found 0/);
    expect(message).toMatch(/unknown option 'no.such.key'/);
  });

  it('rejects a heartbeat interval not below the timeout, and a lease renewal not below the duration', () => {
    expect(() => loadConfig({ 'heartbeat.interval': 5000, 'heartbeat.timeout': 5000 })).toThrow(/'heartbeat.interval' \(5000 ms\) must be below/);
    expect(() => loadConfig({ 'high-availability.lease.renew-interval': 10_000 })).toThrow(/renew-interval/);
  });

  it("takes Flink's heartbeat.rpc-failure-threshold: 2 by default, -1 turns it off, 0 is refused", () => {
    expect(defaultConfig.heartbeatRpcFailureThreshold).toBe(2);
    expect(loadConfig({ 'heartbeat.rpc-failure-threshold': '5' }).heartbeatRpcFailureThreshold).toBe(5);
    expect(loadConfig({ 'heartbeat.rpc-failure-threshold': -1 }).heartbeatRpcFailureThreshold).toBe(-1);
    expect(() => loadConfig({ 'heartbeat.rpc-failure-threshold': 0 })).toThrow(
      /'heartbeat.rpc-failure-threshold' must be a positive count of failed calls, or -1 to turn the rule off, found 0/,
    );
    expect(() => loadConfig({ 'heartbeat.rpc-failure-threshold': -2 })).toThrow(/'heartbeat.rpc-failure-threshold' must be >= -1, found -2/);
  });

  it('gives each slot (process size - framework heap) / slots of heap, and refuses a share below 16 MiB unless slots are light', () => {
    expect(slotHeapMiB(loadConfig({}))).toBe(896);
    expect(slotHeapMiB(loadConfig({ 'taskmanager.memory.process.size': 4096, 'taskmanager.numberOfTaskSlots': 4 }))).toBe(960);
    expect(() => loadConfig({ 'taskmanager.memory.process.size': 512, 'taskmanager.numberOfTaskSlots': 32 })).toThrow(
      "'taskmanager.memory.process.size' (512 MiB) less 'taskmanager.memory.framework.heap.size' (256 MiB) leaves 8 MiB per slot for 32 slots",
    );
    expect(loadConfig({ 'taskmanager.slot.mode': 'light', 'taskmanager.numberOfTaskSlots': 1000 }).numberOfTaskSlots).toBe(1000);
  });

  it('reads FLOE_CONFIG and says so when it is not JSON', () => {
    expect(configFromEnv({ FLOE_CONFIG: '{"rpc.timeout": 1234}' }).rpcTimeoutMs).toBe(1234);
    expect(() => configFromEnv({ FLOE_CONFIG: '{rpc' })).toThrow(/FLOE_CONFIG is not valid JSON/);
  });

  it('reads back a whole config passed on, its unset string options included', () => {
    expect(configFromEnv({ FLOE_CONFIG: configToEnv(defaultConfig) })).toEqual(defaultConfig);
  });

  it("takes 'security.ssl.internal.enabled' as true or false, string or JSON boolean; off by default", () => {
    expect(loadConfig().internalSslEnabled).toBe('false');
    expect(loadConfig({ 'security.ssl.internal.enabled': true }).internalSslEnabled).toBe('true');
    expect(configFromEnv({ FLOE_CONFIG: '{"security.ssl.internal.enabled": "true"}' }).internalSslEnabled).toBe('true');
    expect(loadConfig({ 'security.ssl.internal.enabled': false }).internalSslEnabled).toBe('false');
    expect(() => loadConfig({ 'security.ssl.internal.enabled': 'yes' })).toThrow(/'security\.ssl\.internal\.enabled' must be one of false, true, found "yes"/);
    // Other string options take no boolean.
    expect(() => loadConfig({ 'restart-strategy.type': true })).toThrow(/'restart-strategy\.type' must be a non-empty string, found true/);
  });

  it('is documented: docs/CONFIGURATION.md lists every option with its default', () => {
    const readme = readFileSync(join(import.meta.dirname, '../../docs/CONFIGURATION.md'), 'utf8');
    for (const spec of Object.values(CONFIG_OPTIONS)) {
      const shown = spec.default === '' ? 'unset' : typeof spec.default === 'string' ? `\`${spec.default}\`` : String(spec.default);
      expect(readme).toContain(`| \`${spec.key}\` | ${shown} | ${spec.description} |`);
    }
  });
});
