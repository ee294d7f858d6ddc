"""A stand-in inference engine served by a REAL uvicorn (the HTTP stack vLLM and SGLang serve with), for the engine
HTTP/1.1 client tests (test/engines/http1-uvicorn.test.ts). Raw ASGI, so only python3-uvicorn is needed.

Usage: python3 uvicorn_engine.py [--port N] [--http h11|httptools] [--timeout-keep-alive S] [--nagle]
Prints "PORT <n>" on stdout once it listens (port 0 picks a free one).

Endpoints (vLLM-shaped answers):
  POST /v1/chat/completions  body JSON; answers a chat completion whose prompt_token_ids has one id per 4 body bytes
                             (a 100 KB body gives ~25k ids); {"sleep_ms": n} waits first, {"answer_bytes": n} pads
                             the message content to about n bytes, {"status": c} answers an error instead
  GET  /v1/models            the OpenAI model list with max_model_len
  POST /tokenize             {"prompt": s} -> {"tokens": [...], "count": n, "max_model_len": m}
  GET  /error/<code>         an OpenAI-style error with that status (503 adds Retry-After: 7)
  GET  /head                 the request head as uvicorn saw it: http_version, method, path, query, headers
  GET  /chunked?mb=N         an N MB JSON answer streamed with transfer-encoding: chunked in 64 KB pieces
  GET  /die-mid-answer       sends the head and half the body, then kills this process (SIGKILL)
  GET  /pid                  this process's id
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import sys

import uvicorn


async def read_body(receive):
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def send_json(send, status, value, headers=()):
    body = json.dumps(value).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
    })
    await send({"type": "http.response.body", "body": body})


def error_body(status, message):
    return {"object": "error", "message": message, "type": "BadRequestError" if status < 500 else "InternalServerError", "param": None, "code": status}


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path, method = scope["path"], scope["method"]
    if method == "POST" and path == "/v1/chat/completions":
        raw = await read_body(receive)
        if raw is None:
            return
        request = json.loads(raw)
        if request.get("sleep_ms"):
            await asyncio.sleep(request["sleep_ms"] / 1000)
        if request.get("status"):
            status = request["status"]
            return await send_json(send, status, error_body(status, f"engine answered {status}"), [(b"retry-after", b"7")] if status == 503 else [])
        content = "x" * int(request.get("answer_bytes", 5))
        ids = list(range(len(raw) // 4))
        return await send_json(send, 200, {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "logprobs": None, "finish_reason": "stop", "stop_reason": None, "token_ids": [1, 2, 3]}],
            "usage": {"prompt_tokens": len(ids), "total_tokens": len(ids) + 3, "completion_tokens": 3},
            "prompt_token_ids": ids, "prompt_logprobs": None, "kv_transfer_params": None,
            "echo_bytes": len(raw),
        })
    if method == "GET" and path == "/v1/models":
        return await send_json(send, 200, {"object": "list", "data": [{"id": "m", "object": "model", "created": 1, "owned_by": "vllm", "root": "m", "parent": None, "max_model_len": 32768}]})
    if method == "POST" and path == "/tokenize":
        raw = await read_body(receive)
        prompt = json.loads(raw).get("prompt", "")
        tokens = [ord(c) % 50000 for c in prompt]
        return await send_json(send, 200, {"count": len(tokens), "max_model_len": 32768, "tokens": tokens, "token_strs": None})
    if method == "GET" and path.startswith("/error/"):
        status = int(path.rsplit("/", 1)[1])
        return await send_json(send, status, error_body(status, f"engine answered {status}"), [(b"retry-after", b"7")] if status == 503 else [])
    if path == "/head":
        await read_body(receive)
        return await send_json(send, 200, {
            "http_version": scope["http_version"], "method": method, "path": path, "query": scope["query_string"].decode(),
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
        })
    if path == "/chunked":
        mb = float(dict(p.split("=") for p in scope["query_string"].decode().split("&") if p).get("mb", "1"))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        total = int(mb * 1024 * 1024)
        piece = b"1," * 32768
        await send({"type": "http.response.body", "body": b'{"ids":[', "more_body": True})
        sent = 0
        while sent + len(piece) <= total:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            sent += len(piece)
        await send({"type": "http.response.body", "body": b"1]}"})
        return
    if path == "/die-mid-answer":
        body = b'{"ids":[' + b"1," * 50000 + b"1]}"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
        await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
        return
    if path == "/pid":
        return await send_json(send, 200, {"pid": os.getpid()})
    await send_json(send, 404, {"detail": "Not Found"})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--http", default="h11")
    parser.add_argument("--timeout-keep-alive", type=float, default=5)
    parser.add_argument("--nagle", action="store_true", help="leave Nagle on (see the note below)")
    args = parser.parse_args()
    # asyncio sets TCP_NODELAY on accepted connections only when the listening socket's proto is IPPROTO_TCP
    # (base_events._set_nodelay). A socket made as socket.socket(AF_INET, SOCK_STREAM) has proto 0, so its connections
    # keep Nagle on: uvicorn's two writes per answer (head, then body) then wait for the client's delayed ACK, ~40 ms
    # per call on a reused connection. vLLM hands uvicorn such a socket (create_server_socket); under uvloop (which
    # vLLM installs) TCP_NODELAY is set anyway. --nagle reproduces the asyncio case.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0 if args.nagle else socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, http=args.http, timeout_keep_alive=args.timeout_keep_alive, log_level="warning", lifespan="on", loop="asyncio")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
