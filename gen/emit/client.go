package emit

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// client emits the Client type over a client.Backend (it embeds
// client.Family, which has its Backend, Variant and Close methods), its
// constructors (New in this process, NewClient over any backend: a remote
// one from runtime/remote, so that a program that runs the family in
// process links no network package) and WithVariant. The per-task methods
// are emitted by taskMethods.
func (g *goFile) client() {
	g.add(docComment("WithVariant selects the variant a Client runs (the default is DefaultVariant)."),
		jen.Func().Id("WithVariant").Params(jen.Id("v").Id("Variant")).Qual(ir.ClientPath, "Option").Add(
			short(jen.Return(jen.Qual(ir.ClientPath, "WithVariant").Call(jen.String().Call(jen.Id("v")))))))
	g.add(docComment("Client runs the tasks of the family on one variant, in this process (New) or on a server that speaks the Open Inference Protocol (client.Open[Client](remote.New(Spec(), url)), with package runtime/remote): its methods, params, results and errors are the same either way. Each method validates its params first; an invalid params, a backend failure (such as no linked engine) or an output that does not match the task's artifacts is an error, never a partial result. It is safe for concurrent use; release it with Close (Backend, Variant and Close are client.Family's)."),
		jen.Type().Id("Client").Struct(jen.Qual(ir.ClientPath, "Family").Types(jen.Id("Variant"))))
	g.add(docComment("NewClient returns a client of the family over b, a backend of its spec: what New makes, a remote client of package runtime/remote (remote.New(Spec(), \"http://host:8000\"): wfserve, or any Open Inference Protocol server of a model with the manifest's inputs), or any other client.Backend."),
		jen.Func().Id("NewClient").Params(jen.Id("b").Qual(ir.ClientPath, "Backend")).Op("*").Id("Client").Add(
			short(jen.Return(jen.Op("&").Id("Client").Values(jen.Qual(ir.ClientPath, "NewFamily").Types(jen.Id("Variant")).Call(jen.Id("b")))))))
	open := func(backend jen.Code) jen.Code {
		return short(jen.Return(jen.Qual(ir.ClientPath, "Open").Types(jen.Id("Client")).Call(backend)))
	}
	g.add(docComment("New returns a client that runs the family in this process, through the registered engine. Options select the variant (WithVariant), device, dtype and checkpoint location; see package runtime/client."),
		jen.Func().Id("New").Params(jen.Id("opts").Op("...").Qual(ir.ClientPath, "Option")).Params(jen.Op("*").Id("Client"), jen.Error()).Add(
			open(jen.Qual(ir.ClientPath, "New").Call(jen.Id("family"), jen.Id("opts").Op("...")))))
}

// taskMethods emits the client methods of one task: the plain call, and
// the batch and stream methods of batchable and streaming tasks, each a
// call of the task's client.Task on the client's backend.
func (g *goFile) taskMethods(t *ir.Task) {
	ts := t.Spec
	c := jen.Id("c").Op("*").Id("Client")
	ctx := jen.Id("ctx").Qual("context", "Context")
	backend := jen.Id("c").Dot("Backend").Call()

	first := fmt.Sprintf("%s runs task %q", t.Name, ts.TaskID)
	if l := ir.OneLine(ts.Label); l != "" {
		first += " (" + l + ")"
	}
	first += ". opts are per-call options such as client.WithOutputBuffer."
	var notes []string
	if b := ts.Batching; t.Batch != "" && b.Dim != "" {
		notes = append(notes, fmt.Sprintf("The task's batching names its batch dimension (%s), so this call runs as a batch of one: the path of %s with one item.", b.Dim, t.Batch))
	} else if t.Batch != "" {
		notes = append(notes, fmt.Sprintf("The task is batchable (at most %d items per forward call): %s runs many items; this call runs the method once, unbatched.", b.MaxBatchSize, t.Batch))
	}
	if t.Stream != "" {
		notes = append(notes, "The task streams realtime chunks; this method runs one chunk, "+t.Stream+" a whole session.")
	}
	g.add(docComment(first, strings.Join(notes, " "), deprecated(ts.Deprecated)),
		jen.Func().Params(c.Clone()).Id(t.Name).Params(ctx.Clone(), jen.Id("p").Id(t.Params), callOpts()).Params(jen.Op("*").Id(t.Result), jen.Error()).Block(
			jen.Return(jen.Id(t.Var).Dot("Run").Call(jen.Id("ctx"), backend.Clone(), jen.Op("&").Id("p"), jen.Id("opts").Op("...")))))

	if t.Batch != "" {
		pads := ""
		if len(ts.Batching.PadToBatchSizes) > 0 {
			pads = fmt.Sprintf(", short batches padded to the static sizes %v by repeating their last item", ts.Batching.PadToBatchSizes)
		}
		doc := docComment(
			fmt.Sprintf("%s runs task %q over many items: per-item tensors are stacked along a new leading dimension and run in batches of at most %d items%s; on out-of-memory only the failed slice is split and retried. Results are in input order. Every item is validated first, and the items must share every input that batching does not stack (client.BatchConflict). opts (see package runtime/batch) add a progress hook, per-item errors and more; with batch.WithPerItemErrors, items that failed on their own are nil and the error lists them.", t.Batch, ts.TaskID, ts.Batching.MaxBatchSize, pads))
		g.add(doc,
			jen.Func().Params(c.Clone()).Id(t.Batch).Params(ctx.Clone(), jen.Id("ps").Index().Id(t.Params), jen.Id("opts").Op("...").Qual(ir.BatchPath, "Option")).
				Params(jen.Index().Op("*").Id(t.Result), jen.Error()).Block(
				jen.Return(jen.Id(t.Var).Dot("RunBatch").Call(jen.Id("ctx"), backend.Clone(), jen.Id("ps"), jen.Id("opts").Op("...")))))
	}
	if t.Stream != "" {
		doc := docComment(
			fmt.Sprintf("%s starts a realtime session of task %q: iterate the returned session's Chunks (or Channel) to generate chunk after chunk at the family's realtime cadence, and change its controls with SetControls while it plays. opts (see package runtime/stream) set pacing, initial controls and a chunk limit.", t.Stream, ts.TaskID))
		g.add(doc,
			jen.Func().Params(c.Clone()).Id(t.Stream).Params(ctx.Clone(), jen.Id("p").Id(t.Params), jen.Id("opts").Op("...").Qual(ir.StreamPath, "Option")).
				Params(jen.Op("*").Qual(ir.StreamPath, "Session"), jen.Error()).Block(
				jen.Return(jen.Id(t.Var).Dot("RunStream").Call(jen.Id("ctx"), backend.Clone(), jen.Op("&").Id("p"), jen.Id("opts").Op("...")))))
	}
}

// result emits the result type of a task: one field per artifact, in the
// task's order (client.Task decodes the outputs into them).
func (g *goFile) result(t *ir.Task) {
	fields := make([]jen.Code, 0, len(t.Artifacts))
	for _, a := range t.Artifacts {
		first := fmt.Sprintf("%s is artifact %q (%s).", a.Name, a.Spec.ArtifactID, a.Kind)
		if p := a.Spec.Position; p != nil {
			first = fmt.Sprintf("%s is artifact %q (%s), element %d of the tuple the method returns.", a.Name, a.Spec.ArtifactID, a.Kind, *p)
		}
		presence := "Always set."
		if !a.Spec.Required {
			presence = "Nil when the model returned none."
		}
		if a.Spec.Preview {
			presence += " Marked as a preview artifact."
		}
		fields = append(fields, jen.Comment(docComment(first, a.Spec.Description, presence)).Line().Id(a.Name).Add(typeOf(a.Type)))
	}
	g.add(docComment(fmt.Sprintf("%s holds the outputs of task %q.", t.Result, t.Spec.TaskID)), jen.Type().Id(t.Result).Struct(fields...))
	for _, a := range t.Artifacts {
		if a.Record != nil {
			g.record(t, a)
		}
	}
}

// record emits the struct of a record or record_list artifact: one tensor
// field per key of the dict, in the manifest's order (client.Task fills
// them by key).
func (g *goFile) record(t *ir.Task, a *ir.Artifact) {
	r := a.Record
	fields := make([]jen.Code, 0, len(r.Fields))
	for _, f := range r.Fields {
		first := fmt.Sprintf("%s is key %q.", f.Name, f.Spec.Name)
		if c := (spec.TensorContract{DType: f.Spec.DType, Shape: f.Spec.Shape}); c.DType != "" || c.Shape != nil {
			first = fmt.Sprintf("%s is key %q: %s.", f.Name, f.Spec.Name, c)
		}
		presence := "Always set."
		if !f.Spec.Required {
			presence = "Nil when the dict had no such key."
		}
		fields = append(fields, jen.Comment(docComment(first, f.Spec.Description, presence)).Line().Id(f.Name).Add(typeOf(f.Type)))
	}
	what := fmt.Sprintf("the dict (Dict[str, Tensor]) that is artifact %q of task %q", a.Spec.ArtifactID, t.Spec.TaskID)
	if a.Kind.Holds() == spec.HoldsRecordList {
		what = fmt.Sprintf("one dict of the list (List[Dict[str, Tensor]]) that is artifact %q of task %q", a.Spec.ArtifactID, t.Spec.TaskID)
	}
	g.add(docComment(fmt.Sprintf("%s holds %s: one field per key the manifest declares; other keys are ignored.", r.Type, what)), jen.Type().Id(r.Type).Struct(fields...))
}

// callOpts is the per-call options parameter of a task method.
func callOpts() jen.Code {
	return jen.Id("opts").Op("...").Qual(ir.ClientPath, "CallOption")
}
