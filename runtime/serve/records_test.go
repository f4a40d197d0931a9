package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/golden/records/output/goldenrecords"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// recordSource is a module for the golden records family's manifest, a
// detector's signature: forward returns Tuple[Dict[str, Tensor],
// List[Dict[str, Tensor]]] — losses holding one of its two optional keys
// for more than one image and none otherwise, one dict per image (image i
// with i+1 detections; a key the manifest does not declare) whose first
// value is above -100, so an empty list for an input below; heads a dict
// whose optional key aux (float16) is there for more than two images
// only.
const recordSource = `
def forward(self, x: Tensor) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    losses: Dict[str, Tensor] = {}
    if x.size(0) > 1:
        losses["bbox_regression"] = (x * x).sum()
    detections: List[Dict[str, Tensor]] = []
    for i in range(x.size(0)):
        if bool(x[i, 0, 0] < -100.0):
            continue
        boxes = torch.tanh(torch.matmul(x[i, :i + 1], self.w))
        detections.append({"boxes": boxes, "labels": torch.argmax(boxes, dim=1), "scores": boxes.sum(dim=1), "masks": boxes > 0})
    return losses, detections

def heads(self, x: Tensor) -> Dict[str, Tensor]:
    out: Dict[str, Tensor] = {"mean": x.mean(dim=0), "max": x.amax(dim=0), "unused": x}
    if x.size(0) > 2:
        out["aux"] = x.half() / 3.0
    return out
`

// recordModule builds recordSource and returns its path.
func recordModule(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "records.pt")
	w := make([]float32, 16)
	for i := range w {
		w[i] = float32(i%5)*0.25 - 0.5
	}
	if err := torch.BuildModule(torch.ModuleSource{Source: recordSource, Parameters: map[string]*tensor.Tensor{"w": tensor.FromFloat32(w, 4, 4)}}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordInput is a [images, 3, 4] float32 input with negative,
// fractional and whole values, shifted by shift.
func recordInput(images int, shift float32) *tensor.Tensor {
	v := make([]float32, images*12)
	for i := range v {
		v[i] = float32(i)*0.37 - 1.5 + shift
	}
	return tensor.FromFloat32(v, int64(images), 3, 4)
}

// sameKey fails unless got and want are both nil (a key the dict does not
// hold) or the same tensor bit for bit.
func sameKey(t *testing.T, what string, got, want *tensor.Tensor) {
	t.Helper()
	if got == nil && want == nil {
		return
	}
	if !tensorsEqual(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestRemoteRecordsEqualInProcess runs tasks returning a dict of tensors
// and a list of them (inside a tuple, and a dict alone) through wfserve
// with the generated remote client over REST with binary tensors, REST
// with JSON tensors and gRPC: every record is the in-process client's bit
// for bit — an optional key absent stays nil, a record without keys is
// there and empty, each image holds its own number of detections, and
// an empty list comes back empty, not absent.
func TestRemoteRecordsEqualInProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := recordModule(t)
	opts := []client.Option{client.WithCheckpointPath(path), client.WithDevice("cpu")}
	local, err := goldenrecords.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	s := withGRPC(t, serveFamilies(t, serve.Config{}, serve.Family{Spec: goldenrecords.Spec(), Options: opts}))

	for _, c := range []struct {
		name string
		url  string
		opts []remote.Option
	}{
		{"REST binary", s.url, nil},
		{"REST JSON", s.url, []remote.Option{remote.WithJSONTensors()}},
		{"gRPC", "grpc://" + s.addr, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, err := client.Open[goldenrecords.Client](remote.New(goldenrecords.Spec(), c.url, c.opts...))
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()

			for _, c := range []struct {
				images, detected int
				shift            float32
			}{{3, 3, 0}, {1, 1, 0}, {2, 0, -1000}} {
				images, detected := c.images, c.detected
				want, err := local.Detect(ctx, goldenrecords.DetectParams{X: recordInput(images, c.shift)})
				if err != nil {
					t.Fatal(err)
				}
				got, err := rc.Detect(ctx, goldenrecords.DetectParams{X: recordInput(images, c.shift)})
				if err != nil {
					t.Fatalf("detect of %d images: %v", images, err)
				}
				if want.Losses == nil || (want.Losses.BboxRegression != nil) != (images > 1) || want.Losses.Classification != nil {
					t.Fatalf("in-process losses of %d images: %+v", images, want.Losses)
				}
				if got.Losses == nil {
					t.Fatalf("%d images: losses nil, want a record", images)
				}
				sameKey(t, "losses.classification", got.Losses.Classification, want.Losses.Classification)
				sameKey(t, "losses.bbox_regression", got.Losses.BboxRegression, want.Losses.BboxRegression)
				if len(want.Detections) != detected || want.Detections == nil {
					t.Fatalf("in-process detections of %d images: %d (nil %v)", images, len(want.Detections), want.Detections == nil)
				}
				if got.Detections == nil || len(got.Detections) != detected {
					t.Fatalf("%d images: %d detections (nil %v)", images, len(got.Detections), got.Detections == nil)
				}
				for i, w := range want.Detections {
					d := got.Detections[i]
					sameKey(t, fmt.Sprintf("image %d boxes", i), d.Boxes, w.Boxes)
					sameKey(t, fmt.Sprintf("image %d labels", i), d.Labels, w.Labels)
					sameKey(t, fmt.Sprintf("image %d scores", i), d.Scores, w.Scores)
					if w.Boxes.Shape[0] != int64(i+1) || w.Labels.DType != tensor.Int64 {
						t.Errorf("in-process image %d: boxes %v, labels %s", i, w.Boxes.Shape, w.Labels.DType)
					}
				}
			}

			for _, images := range []int{3, 1} {
				want, err := local.Heads(ctx, goldenrecords.HeadsParams{X: recordInput(images, 0)})
				if err != nil {
					t.Fatal(err)
				}
				got, err := rc.Heads(ctx, goldenrecords.HeadsParams{X: recordInput(images, 0)})
				if err != nil {
					t.Fatalf("heads of %d images: %v", images, err)
				}
				if got.Heads == nil || (want.Heads.Aux != nil) != (images > 2) {
					t.Fatalf("heads of %d images: got %+v, in process %+v", images, got.Heads, want.Heads)
				}
				sameKey(t, "mean", got.Heads.Mean, want.Heads.Mean)
				sameKey(t, "max", got.Heads.Maximum, want.Heads.Maximum)
				sameKey(t, "aux", got.Heads.Aux, want.Heads.Aux)
			}
		})
	}
}

// TestRecordsOnTheWire is what a generic OIP client sees of records: one
// output per key a dict holds, named losses.KEY and detections.I.KEY, the
// counts in the response parameters losses.count (keys) and
// detections.count (dicts), an output filter naming the artifact
// selecting all of its tensors, and model metadata describing each
// record and its keys under the artifact's id.
func TestRecordsOnTheWire(t *testing.T) {
	t.Parallel()
	opts := []client.Option{client.WithCheckpointPath(recordModule(t)), client.WithDevice("cpu")}
	s := serveFamilies(t, serve.Config{}, serve.Family{Spec: goldenrecords.Spec(), Options: opts})
	infer := s.url + "/v2/models/golden-records/infer"
	x := `{"name":"x","datatype":"FP32","shape":[2,3,4],"data":[1,2,3,4,5,6,7,8,9,10,11,12,1,2,3,4,5,6,7,8,9,10,11,12]}`

	status, _, b := call(t, "POST", infer, `{"inputs":[`+x+`]}`)
	if status != 200 {
		t.Fatalf("detect: %d %s", status, b)
	}
	var resp oip.InferenceResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range resp.Outputs {
		names = append(names, o.Name)
	}
	if got := strings.Join(names, " "); got != "losses.bbox_regression detections.0.boxes detections.0.labels detections.0.scores detections.1.boxes detections.1.labels detections.1.scores" {
		t.Errorf("detect's outputs: %s", got)
	}
	if n, _, _ := resp.Parameters.IntParam("losses.count"); n != 1 {
		t.Errorf("losses.count: %s", b)
	}
	if n, _, _ := resp.Parameters.IntParam("detections.count"); n != 2 {
		t.Errorf("detections.count: %s", b)
	}
	if o := resp.Outputs[1]; !slicesEqual(o.Shape, []int64{1, 4}) || o.Datatype != oip.FP32 {
		t.Errorf("image 0's boxes: %+v", o)
	}
	if o := resp.Outputs[5]; !slicesEqual(o.Shape, []int64{2}) || o.Datatype != oip.Int64 {
		t.Errorf("image 1's labels: %+v", o)
	}

	status, _, b = call(t, "POST", infer, `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,3,4],"data":[-999,2,3,4,5,6,7,8,9,10,11,12]}],"outputs":[{"name":"detections"}]}`)
	if status != 200 || !strings.Contains(string(b), `"outputs":[]`) || !strings.Contains(string(b), `"detections.count":0`) || strings.Contains(string(b), "losses") {
		t.Errorf("no detections, detections only: %d %s", status, b)
	}
	status, _, b = call(t, "POST", infer, `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,3,4],"data":[-999,2,3,4,5,6,7,8,9,10,11,12]}],"outputs":[{"name":"losses"}]}`)
	if status != 200 || !strings.Contains(string(b), `"outputs":[]`) || !strings.Contains(string(b), `"losses.count":0`) {
		t.Errorf("losses without keys: %d %s", status, b)
	}

	status, _, b = call(t, "POST", infer, `{"inputs":[`+x+`],"outputs":[{"name":"detections.0.boxes"}]}`)
	if status != 400 || !strings.Contains(errorBody(t, b), `output "detections.0.boxes" is not an artifact of task "detect" (artifacts: losses, detections)`) {
		t.Errorf("a key as an output filter: %d %s", status, b)
	}

	status, _, b = call(t, "GET", s.url+"/v2/models/golden-records", "")
	var md oip.ModelMetadata
	if status != 200 || json.Unmarshal(b, &md) != nil {
		t.Fatalf("metadata: %d %s", status, b)
	}
	det := md.Outputs[1]
	if det.Name != "detections" || det.Parameters["kind"] != "record_list" || det.Parameters["count_parameter"] != "detections.count" ||
		det.Parameters["elements"] != "detections.0.boxes, detections.0.labels, detections.0.scores, detections.1.boxes, ..." ||
		det.Parameters["fields"] != `[{"name":"boxes","datatype":"FP32","shape":[-1,4],"required":true},{"name":"labels","datatype":"INT64","shape":[-1],"required":true},{"name":"scores","datatype":"FP32","shape":[-1],"required":true}]` {
		t.Errorf("detections in the metadata: %+v", det)
	}
	if l := md.Outputs[0]; l.Name != "losses" || l.Parameters["kind"] != "record" || l.Parameters["elements"] != "losses.classification, losses.bbox_regression" {
		t.Errorf("losses in the metadata: %+v", l)
	}
}

// A server whose answer breaks the mapping — a required key missing, a
// gap, a count the tensors do not match, a key the manifest does not
// declare — is an error of the generated remote client that says what is
// wrong, never a panic or a partial result.
func TestRemoteRecordsMalformedAnswer(t *testing.T) {
	t.Parallel()
	boxes := `{"name":"detections.%d.boxes","datatype":"FP32","shape":[0,4],"data":[]}`
	labels := `{"name":"detections.%d.labels","datatype":"INT64","shape":[0],"data":[]}`
	scores := `{"name":"detections.%d.scores","datatype":"FP32","shape":[0],"data":[]}`
	image := func(i int, parts ...string) string {
		out := make([]string, len(parts))
		for k, p := range parts {
			out[k] = fmt.Sprintf(p, i)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		name, params, outputs, want string
	}{
		{"a required key missing", `"losses.count":0,"detections.count":1`, image(0, boxes, scores),
			`artifact "detections": element 0: required key "labels" missing: the response has no output detections.0.labels`},
		{"a gap", `"losses.count":0,"detections.count":2`, image(1, boxes, labels, scores),
			`artifact "detections": element 0: required key "boxes" missing`},
		{"beyond the count", `"losses.count":0,"detections.count":1`, image(0, boxes, labels, scores) + "," + image(1, boxes, labels, scores),
			`response parameter "detections.count" says 1 elements, and the response has detections.1.boxes, beyond them`},
		{"no count", `"losses.count":0`, image(0, boxes, labels, scores), `no parameter "detections.count"`},
		{"an unknown key", `"losses.count":1,"detections.count":0`, `{"name":"losses.total","datatype":"FP32","shape":[],"data":[1]}`,
			`output "losses.total": "total" is no key of artifact "losses"`},
		{"keys miscounted", `"losses.count":2,"detections.count":0`, `{"name":"losses.classification","datatype":"FP32","shape":[],"data":[1]}`,
			`response parameter "losses.count" says 2 keys, and the response has 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"model_name":"golden-records","model_version":"default","parameters":{%s},"outputs":[%s]}`, c.params, c.outputs)
			}))
			defer srv.Close()
			rc, err := client.Open[goldenrecords.Client](remote.New(goldenrecords.Spec(), srv.URL, remote.WithJSONTensors()))
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := rc.Detect(context.Background(), goldenrecords.DetectParams{X: recordInput(1, 0)})
			if err == nil || !strings.Contains(err.Error(), c.want) || got != nil {
				t.Errorf("got %+v, %v\nwant an error saying %s", got, err, c.want)
			}
		})
	}
}
