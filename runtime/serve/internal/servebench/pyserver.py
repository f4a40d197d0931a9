"""The Python peer of wfserve in the serving load test (servebench).

A FastAPI app served by uvicorn that answers the Open Inference Protocol's
infer request for each model it is given exactly as wfserve does: it
decodes the JSON body, builds the int64 token tensor from the "tokens"
input (any other input is passed to forward as a keyword argument, its
first datum), runs the model's TorchScript file under inference mode and
answers the float32 result as the "embedding" output. The endpoint is
async and runs the model inline (no thread pool hop), the fastest plain
FastAPI form; the body is parsed with json.loads, not pydantic.

usage: /usr/bin/python3 pyserver.py FD THREADS NAME=MODEL.pt [NAME=MODEL.pt ...]
FD is a listening socket the caller bound and passed (servebench: fd 3).
Prints "ready" once warmed up and serving.
"""
import json
import socket
import sys

import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response


def main():
    fd, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    modules = {}
    for arg in sys.argv[3:]:
        name, path = arg.split("=", 1)
        modules[name] = torch.jit.load(path, map_location="cpu").eval()
        with torch.inference_mode():
            for _ in range(5):  # warm up the profiling executor
                modules[name](torch.arange(16))

    app = FastAPI()

    @app.get("/v2/health/ready")
    async def ready():
        return {"ready": True}

    @app.post("/v2/models/{name}/infer")
    async def infer(name: str, request: Request):
        module = modules.get(name)
        if module is None:
            return JSONResponse({"error": f"no model {name}"}, status_code=404)
        try:
            req = json.loads(await request.body())
            tokens = None
            kwargs = {}
            for inp in req["inputs"]:
                if inp["name"] == "tokens":
                    tokens = torch.tensor(inp["data"], dtype=torch.int64).reshape(inp["shape"])
                else:
                    kwargs[inp["name"]] = inp["data"][0]
            if tokens is None:
                return JSONResponse({"error": "missing required input(s) tokens"}, status_code=400)
            with torch.inference_mode():
                emb = module(tokens, **kwargs)
        except Exception as e:  # the protocol's error body
            return JSONResponse({"error": str(e)}, status_code=400)
        body = {
            "model_name": name,
            "model_version": "default",
            "id": req.get("id", ""),
            "parameters": {"task": "embed"},
            "outputs": [{"name": "embedding", "shape": list(emb.shape), "datatype": "FP32", "data": emb.flatten().tolist()}],
        }
        return Response(json.dumps(body), media_type="application/json")

    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    print("ready", torch.get_num_threads(), flush=True)
    server.run(sockets=[socket.socket(fileno=fd)])  # bound by the Go side


if __name__ == "__main__":
    main()
