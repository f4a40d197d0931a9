"""Triton's gRPC client against wfserve's model repository: index, load,
readiness, infer (with a priority and a queue timeout), unload (argv: host:port, token). Prints a JSON summary."""
import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient

url, token = sys.argv[1], sys.argv[2]
headers = {"authorization": "Bearer " + token}
client = grpcclient.InferenceServerClient(url=url)


def states():
    index = client.get_model_repository_index(headers=headers)
    return {m.name: m.state for m in index.models}


before = states()
ready_before = client.is_model_ready("tiny-encoder", headers=headers)
client.load_model("tiny-encoder", headers=headers)
loaded = states()
ready_loaded = client.is_model_ready("tiny-encoder", headers=headers)
tokens = grpcclient.InferInput("tokens", [4], "INT64")
tokens.set_data_from_numpy(np.array([1, 2, 3, 4], dtype=np.int64))
# Triton's request parameters as its gRPC client sends them: priority as
# a uint64 parameter, timeout (microseconds) as an int64 one.
result = client.infer("tiny-encoder", [tokens], headers=headers,
                      priority=1, timeout=60_000_000)
embedding = result.as_numpy("embedding")
client.unload_model("tiny-encoder", headers=headers)
after = states()
ready_after = client.is_model_ready("tiny-encoder", headers=headers)
try:
    client.load_model("nope", headers=headers)
    unknown = None
except grpcclient.InferenceServerException as e:
    unknown = e.status()
print(json.dumps({"before": before, "loaded": loaded, "after": after,
                  "ready_before": ready_before, "ready_loaded": ready_loaded,
                  "ready_after": ready_after,
                  "embedding": [float(x) for x in embedding.reshape(-1)],
                  "model_version": result.get_response().model_version,
                  "unknown_load": unknown}))
