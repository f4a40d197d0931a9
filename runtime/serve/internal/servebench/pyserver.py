"""The Python peer of wfserve in the serving load test (servebench).

A FastAPI app served by uvicorn that answers the Open Inference Protocol's
infer request for the tiny encoder exactly as wfserve does: it decodes the
JSON body, builds the int64 token tensor from the "tokens" input, runs the
same TorchScript file's forward under inference mode and answers the
float32 embedding as the "embedding" output. The endpoint is async and runs
the model inline (no thread pool hop), the fastest plain FastAPI form for a
model this small; the body is parsed with json.loads, not pydantic.

usage: /usr/bin/python3 pyserver.py MODEL.pt PORT THREADS
Prints "ready" once warmed up and serving.
"""
import json
import sys

import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response


def main():
    path, port, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    module = torch.jit.load(path, map_location="cpu").eval()
    with torch.inference_mode():
        for _ in range(5):  # warm up the profiling executor
            module(torch.arange(16), True)

    app = FastAPI()

    @app.get("/v2/health/ready")
    async def ready():
        return {"ready": True}

    @app.post("/v2/models/tiny-encoder/infer")
    async def infer(request: Request):
        try:
            req = json.loads(await request.body())
            normalize = True
            tokens = None
            for inp in req["inputs"]:
                if inp["name"] == "tokens":
                    tokens = torch.tensor(inp["data"], dtype=torch.int64).reshape(inp["shape"])
                elif inp["name"] == "normalize":
                    normalize = bool(inp["data"][0])
            if tokens is None:
                return JSONResponse({"error": "missing required input(s) tokens"}, status_code=400)
            with torch.inference_mode():
                emb = module(tokens, normalize)
        except Exception as e:  # the protocol's error body
            return JSONResponse({"error": str(e)}, status_code=400)
        body = {
            "model_name": "tiny-encoder",
            "model_version": "default",
            "id": req.get("id", ""),
            "parameters": {"task": "embed"},
            "outputs": [{"name": "embedding", "shape": list(emb.shape), "datatype": "FP32", "data": emb.flatten().tolist()}],
        }
        return Response(json.dumps(body), media_type="application/json")

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    print("ready", torch.get_num_threads(), flush=True)
    server.run()


if __name__ == "__main__":
    main()
