# Drives wfserve with Triton's Python HTTP client (tritonclient.http), its
# binary tensor data mode, as a third-party OIP client: run by
# TestTritonClientBinary (tritonclient_test.go), which compares what it
# writes with the in-process client's outputs.
#
#   python3 binary.py HOST:PORT DIR
#
# DIR holds image.bin (float32 [3, 224, 224], little-endian); the outputs
# are written there as raw little-endian arrays, and a summary as JSON on
# stdout.
import json
import sys

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

url, out = sys.argv[1], sys.argv[2]
client = httpclient.InferenceServerClient(url=url)
summary = {"ready": client.is_server_ready(), "extensions": client.get_server_metadata()["extensions"]}

# An image in, binary; its logits asked for binary.
image = np.fromfile(out + "/image.bin", dtype="<f4").reshape(3, 224, 224)
inp = httpclient.InferInput("image", [3, 224, 224], "FP32")
inp.set_data_from_numpy(image, binary_data=True)
res = client.infer("image-classifier", [inp], outputs=[httpclient.InferRequestedOutput("logits", binary_data=True)])
res.as_numpy("logits").astype("<f4").tofile(out + "/logits.bin")
summary["logits_binary"] = res.get_output("logits")["parameters"]["binary_data_size"]

# A BYTES prompt and integer scalars in, binary; no outputs named, so the
# client asks for every output binary (binary_data_output); a parameter.
prompt = httpclient.InferInput("prompt", [1], "BYTES")
prompt.set_data_from_numpy(np.array(["a harbour at dusk".encode()], dtype=np.object_), binary_data=True)
seed = httpclient.InferInput("seed", [1], "INT64")
seed.set_data_from_numpy(np.array([3], dtype=np.int64), binary_data=True)
frames = httpclient.InferInput("num_frames", [1], "INT32")
frames.set_data_from_numpy(np.array([17], dtype=np.int32), binary_data=True)
res = client.infer("tiny-world", [prompt, seed, frames], parameters={"task": "text-to-video"})
video = res.as_numpy("video")
video.tofile(out + "/video.bin")
summary["video_shape"] = list(video.shape)
summary["video_dtype"] = str(video.dtype)

# Tokens and a BOOL in, binary; the embedding asked for as JSON.
tokens = httpclient.InferInput("tokens", [4], "INT64")
tokens.set_data_from_numpy(np.array([5, 6, 7, 8], dtype=np.int64), binary_data=True)
normalize = httpclient.InferInput("normalize", [1], "BOOL")
normalize.set_data_from_numpy(np.array([False]), binary_data=True)
res = client.infer("tiny-encoder", [tokens, normalize], outputs=[httpclient.InferRequestedOutput("embedding", binary_data=False)])
res.as_numpy("embedding").astype("<f4").tofile(out + "/embedding.bin")
summary["embedding_json"] = "data" in res.get_output("embedding")

# A refused request: the server's message reaches the client.
frames.set_data_from_numpy(np.array([10], dtype=np.int32), binary_data=True)
try:
    client.infer("tiny-world", [prompt, frames])
    summary["error"] = None
except InferenceServerException as e:
    summary["error"] = e.message()

print(json.dumps(summary))
