"""Triton's HTTP client against wfserve's model repository: index, load,
infer, unload (argv: host:port, token). Prints a JSON summary."""
import json
import sys

import numpy as np
import tritonclient.http as httpclient

url, token = sys.argv[1], sys.argv[2]
headers = {"Authorization": "Bearer " + token}
client = httpclient.InferenceServerClient(url=url)


def states():
    return {e["name"]: e["state"] for e in client.get_model_repository_index(headers=headers)}


before = states()
client.load_model("tiny-encoder", headers=headers)
loaded = states()
ready_loaded = client.is_model_ready("tiny-encoder", headers=headers)
tokens = httpclient.InferInput("tokens", [4], "INT64")
tokens.set_data_from_numpy(np.array([1, 2, 3, 4], dtype=np.int64))
result = client.infer("tiny-encoder", [tokens], headers=headers)
embedding = result.as_numpy("embedding")
client.unload_model("tiny-encoder", headers=headers)
after = states()
ready_after = client.is_model_ready("tiny-encoder", headers=headers)
print(json.dumps({"before": before, "loaded": loaded, "after": after,
                  "ready_loaded": ready_loaded, "ready_after": ready_after,
                  "embedding": int(embedding.shape[-1])}))
