// Starts Portkey's gateway (bench/.peers/portkey) listening on 127.0.0.1 only. Its `gateway` bin takes just
// `--port=N` and `--headless` and binds every interface (docs/protocol-notes.md#peer-gateways), so this wrapper pins the host of every
// TCP listen before loading it. Usage: node bench/peers/portkey-loopback.mjs --port=N --headless
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const [first] = args;
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    const callback = args.find((a) => typeof a === 'function');
    return listen.call(this, { port: Number(first), host: '127.0.0.1' }, ...(callback ? [callback] : []));
  }
  if (first && typeof first === 'object' && !('path' in first)) args[0] = { ...first, host: '127.0.0.1' };
  return listen.apply(this, args);
};

await import(new URL('../.peers/portkey/node_modules/@portkey-ai/gateway/build/start-server.js', import.meta.url).href);
