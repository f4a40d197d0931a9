package emit

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/worldfoundry/wfgen/gen/ir"
)

// client emits the Client type, New, WithVariant and the fixed methods.
// The per-task methods are emitted by taskMethods.
func (g *goFile) client() {
	c := jen.Id("c").Op("*").Id("Client")
	g.add(docComment("WithVariant selects the variant a Client runs (the default is DefaultVariant)."),
		jen.Func().Id("WithVariant").Params(jen.Id("v").Id("Variant")).Qual(ir.ClientPath, "Option").Add(
			short(jen.Return(jen.Qual(ir.ClientPath, "WithVariant").Call(jen.String().Call(jen.Id("v")))))))
	g.add(docComment("Client runs the tasks of the family on one variant. It is safe for concurrent use. Create it with New and release it with Close."),
		jen.Type().Id("Client").Struct(jen.Id("rt").Op("*").Qual(ir.ClientPath, "Client")))
	g.add(docComment("New returns a client for the family. Options select the variant (WithVariant), device, dtype and checkpoint location; see package runtime/client."),
		jen.Func().Id("New").Params(jen.Id("opts").Op("...").Qual(ir.ClientPath, "Option")).Params(jen.Op("*").Id("Client"), jen.Error()).Block(
			jen.List(jen.Id("rt"), jen.Err()).Op(":=").Qual(ir.ClientPath, "New").Call(jen.Id("Spec").Call(), jen.Id("opts").Op("...")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(jen.Op("&").Id("Client").Values(jen.Id("rt").Op(":").Id("rt")), jen.Nil())))
	g.add(docComment("Runtime returns the untyped runtime client underneath (nil for a Client that New did not create)."),
		jen.Func().Params(c.Clone()).Id("Runtime").Params().Op("*").Qual(ir.ClientPath, "Client").Block(
			jen.If(jen.Id("c").Op("==").Nil()).Block(jen.Return(jen.Nil())),
			jen.Return(jen.Id("c").Dot("rt"))))
	g.add(docComment("Variant returns the variant the client runs."),
		jen.Func().Params(c.Clone()).Id("Variant").Params().Id("Variant").Add(
			short(jen.Return(jen.Id("Variant").Call(jen.Id("c").Dot("rt").Dot("Variant").Call().Dot("VariantID"))))))
	g.add(docComment("Close releases the client's model. It is safe to call more than once."),
		jen.Func().Params(c.Clone()).Id("Close").Params().Error().Block(
			jen.If(jen.Id("c").Op("==").Nil().Op("||").Id("c").Dot("rt").Op("==").Nil()).Block(jen.Return(jen.Nil())),
			jen.Return(jen.Id("c").Dot("rt").Dot("Close").Call())))
}

// remoteClient emits RemoteClient, NewRemote and its fixed methods.
func (g *goFile) remoteClient() {
	c := jen.Id("c").Op("*").Id("RemoteClient")
	g.add(docComment("RemoteClient runs the tasks of the family on a server that speaks the Open Inference Protocol (KServe v2): wfserve, or any server that serves a model with the manifest's inputs. Its methods are the Client's, with the same params, results and errors. It is safe for concurrent use."),
		jen.Type().Id("RemoteClient").Struct(jen.Id("rt").Op("*").Qual(ir.RemotePath, "Client")))
	g.add(docComment("NewRemote returns a client of the family's model at the server baseURL (such as \"http://host:8000\"). Options select the variant, a bearer token and the HTTP client; see package runtime/remote."),
		jen.Func().Id("NewRemote").Params(jen.Id("baseURL").String(), jen.Id("opts").Op("...").Qual(ir.RemotePath, "Option")).Params(jen.Op("*").Id("RemoteClient"), jen.Error()).Block(
			jen.List(jen.Id("rt"), jen.Err()).Op(":=").Qual(ir.RemotePath, "New").Call(jen.Id("Spec").Call(), jen.Id("baseURL"), jen.Id("opts").Op("...")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(jen.Op("&").Id("RemoteClient").Values(jen.Id("rt").Op(":").Id("rt")), jen.Nil())))
	g.add(docComment("Remote returns the untyped remote client underneath (nil for a RemoteClient that NewRemote did not create)."),
		jen.Func().Params(c.Clone()).Id("Remote").Params().Op("*").Qual(ir.RemotePath, "Client").Block(
			jen.If(jen.Id("c").Op("==").Nil()).Block(jen.Return(jen.Nil())),
			jen.Return(jen.Id("c").Dot("rt"))))
	g.add(docComment("Variant returns the variant the client runs."),
		jen.Func().Params(c.Clone()).Id("Variant").Params().Id("Variant").Add(
			short(jen.Return(jen.Id("Variant").Call(jen.Id("c").Dot("rt").Dot("Variant").Call())))))
	g.add(docComment("Close releases nothing the server holds (each call is a request); it is there so that RemoteClient is a Runner."),
		jen.Func().Params(c.Clone()).Id("Close").Params().Error().Add(short(jen.Return(jen.Nil()))))
}

// runner emits the Runner interface both clients implement.
func (g *goFile) runner() {
	methods := []jen.Code{}
	for _, t := range g.fam.Tasks {
		ctx := jen.Id("ctx").Qual("context", "Context")
		methods = append(methods, jen.Comment(t.Name+" runs task "+fmt.Sprintf("%q", t.Spec.TaskID)+".").Line().
			Id(t.Name).Params(ctx.Clone(), jen.Id("p").Id(t.Params), callOpts()).Params(jen.Op("*").Id(t.Result), jen.Error()))
		if t.Batch != "" {
			methods = append(methods, jen.Comment(t.Batch+" runs it over many items.").Line().
				Id(t.Batch).Params(ctx.Clone(), jen.Id("ps").Index().Id(t.Params), jen.Id("opts").Op("...").Qual(ir.BatchPath, "Option")).Params(jen.Index().Op("*").Id(t.Result), jen.Error()))
		}
		if t.Stream != "" {
			methods = append(methods, jen.Comment(t.Stream+" starts a realtime session of it.").Line().
				Id(t.Stream).Params(ctx.Clone(), jen.Id("p").Id(t.Params), jen.Id("opts").Op("...").Qual(ir.StreamPath, "Option")).Params(jen.Op("*").Qual(ir.StreamPath, "Session"), jen.Error()))
		}
	}
	methods = append(methods, jen.Comment("Close releases the client.").Line().Id("Close").Params().Error())
	g.add(docComment("Runner is what both clients of the family do: code written against it runs the tasks in-process (Client, from New) or on a server (RemoteClient, from NewRemote), by changing the constructor."),
		jen.Type().Id("Runner").Interface(methods...))
	g.add("", jen.Var().Defs(
		jen.Id("_").Id("Runner").Op("=").Parens(jen.Op("*").Id("Client")).Call(jen.Nil()),
		jen.Id("_").Id("Runner").Op("=").Parens(jen.Op("*").Id("RemoteClient")).Call(jen.Nil()),
	))
}

// taskRef is the client.TaskRef of a task.
func taskRef(t *ir.Task) jen.Code {
	return jen.Qual(ir.ClientPath, "TaskRef").Values(jen.Id("Family").Op(":").Id("FamilyID"), jen.Id("Task").Op(":").Lit(t.Spec.TaskID))
}

// taskMethods emits the client methods of one task: the plain call, and
// the batch and stream methods of batchable and streaming tasks.
func (g *goFile) taskMethods(t *ir.Task) {
	ts := t.Spec
	c := jen.Id("c").Op("*").Id("Client")
	ctx := jen.Id("ctx").Qual("context", "Context")
	rt := jen.Id("c").Dot("Runtime").Call()
	decode := jen.Parens(jen.Op("*").Id(t.Result)).Dot("fromOutputs")

	first := fmt.Sprintf("%s runs task %q", t.Name, ts.TaskID)
	if l := ir.OneLine(ts.Label); l != "" {
		first += " (" + l + ")"
	}
	first += " on the client's variant. It validates p first; an invalid p, a runtime failure (such as no linked engine) or an output that does not match the task's artifacts is an error, never a partial result. opts are per-call options such as client.WithOutputBuffer."
	var notes []string
	if t.Batch != "" {
		notes = append(notes, fmt.Sprintf("The task is batchable (at most %d items per forward call). %s runs many items.", ts.Batching.MaxBatchSize, t.Batch))
	}
	if t.Stream != "" {
		notes = append(notes, "The task streams realtime chunks; this method runs one chunk, "+t.Stream+" a whole session.")
	}
	g.add(docComment(first, strings.Join(notes, " "), deprecated(ts.Deprecated)),
		jen.Func().Params(c.Clone()).Id(t.Name).Params(ctx.Clone(), jen.Id("p").Id(t.Params), callOpts()).Params(jen.Op("*").Id(t.Result), jen.Error()).Block(
			jen.Return(jen.Qual(ir.ClientPath, "Run").Call(jen.Id("ctx"), rt.Clone(), taskRef(t), jen.Op("&").Id("p"), decode.Clone(), jen.Id("opts").Op("...")))))

	g.remoteMethods(t)
	if t.Batch != "" {
		pads := ""
		if len(ts.Batching.PadToBatchSizes) > 0 {
			pads = fmt.Sprintf(", short batches padded to the static sizes %v by repeating their last item", ts.Batching.PadToBatchSizes)
		}
		doc := docComment(
			fmt.Sprintf("%s runs task %q over many items: per-item tensors are stacked along a new leading dimension and run in batches of at most %d items%s; on out-of-memory only the failed slice is split and retried. Results are in input order.", t.Batch, ts.TaskID, ts.Batching.MaxBatchSize, pads),
			"Every item is validated first and all violations are reported with their item index. Non-tensor fields must be equal across the items. opts (see package runtime/batch) add a progress hook, per-item errors and more; with batch.WithPerItemErrors, items that failed on their own are nil and the error lists them.")
		g.add(doc,
			jen.Func().Params(c.Clone()).Id(t.Batch).Params(ctx.Clone(), jen.Id("ps").Index().Id(t.Params), jen.Id("opts").Op("...").Qual(ir.BatchPath, "Option")).
				Params(jen.Index().Op("*").Id(t.Result), jen.Error()).Block(
				jen.Return(jen.Qual(ir.ClientPath, "RunBatch").Call(jen.Id("ctx"), rt.Clone(), taskRef(t), jen.Id("ps"), decode.Clone(), jen.Id("opts").Op("...")))))
	}
	if t.Stream != "" {
		doc := docComment(
			fmt.Sprintf("%s starts a realtime session of task %q: iterate the returned session's Chunks (or Channel) to generate chunk after chunk at the family's realtime cadence, and change its controls with SetControls while it plays. It validates p first.", t.Stream, ts.TaskID),
			"opts (see package runtime/stream) set pacing, initial controls and a chunk limit.")
		g.add(doc,
			jen.Func().Params(c.Clone()).Id(t.Stream).Params(ctx.Clone(), jen.Id("p").Id(t.Params), jen.Id("opts").Op("...").Qual(ir.StreamPath, "Option")).
				Params(jen.Op("*").Qual(ir.StreamPath, "Session"), jen.Error()).Block(
				jen.Return(jen.Qual(ir.ClientPath, "RunStream").Call(jen.Id("ctx"), rt.Clone(), taskRef(t), jen.Op("&").Id("p"), jen.Id("opts").Op("...")))))
	}
}

// result emits the result type of a task and its fromOutputs method.
func (g *goFile) result(t *ir.Task) {
	fields := make([]jen.Code, 0, len(t.Artifacts))
	for _, a := range t.Artifacts {
		first := fmt.Sprintf("%s is artifact %q (%s).", a.Name, a.Spec.ArtifactID, a.Kind)
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

	stmts := []jen.Code{jen.Id("o").Op(":=").Qual(ir.ClientPath, "NewArtifacts").Call(jen.Id("out"), jen.Id("family"), jen.Lit(t.Index))}
	for _, a := range t.Artifacts {
		stmts = append(stmts, jen.Qual(ir.ClientPath, "Decode").Call(jen.Op("&").Id("o"), jen.Lit(a.Index), jen.Op("&").Id("r").Dot(a.Name)))
	}
	stmts = append(stmts, jen.Return(jen.Id("o").Dot("Err").Call()))
	g.add(docComment("fromOutputs sets r from the runtime's outputs keyed by artifact id."),
		jen.Func().Params(jen.Id("r").Op("*").Id(t.Result)).Id("fromOutputs").Params(jen.Id("out").Map(jen.String()).Any()).Error().Block(stmts...))
}

// remoteMethods emits the RemoteClient methods of one task: the Client's,
// on the remote backend.
func (g *goFile) remoteMethods(t *ir.Task) {
	c := jen.Id("c").Op("*").Id("RemoteClient")
	ctx := jen.Id("ctx").Qual("context", "Context")
	rt := jen.Id("c").Dot("Remote").Call()
	decode := jen.Parens(jen.Op("*").Id(t.Result)).Dot("fromOutputs")
	g.add(docComment(fmt.Sprintf("%s runs task %q on the server, as Client.%s does in-process.", t.Name, t.Spec.TaskID, t.Name)),
		jen.Func().Params(c.Clone()).Id(t.Name).Params(ctx.Clone(), jen.Id("p").Id(t.Params), callOpts()).Params(jen.Op("*").Id(t.Result), jen.Error()).Block(
			jen.Return(jen.Qual(ir.ClientPath, "Run").Call(jen.Id("ctx"), rt.Clone(), taskRef(t), jen.Op("&").Id("p"), decode.Clone(), jen.Id("opts").Op("...")))))
	if t.Batch != "" {
		g.add(docComment(fmt.Sprintf("%s runs task %q over many items on the server (one request per item, several in flight, which a batching server merges), as Client.%s does in-process.", t.Batch, t.Spec.TaskID, t.Batch)),
			jen.Func().Params(c.Clone()).Id(t.Batch).Params(ctx.Clone(), jen.Id("ps").Index().Id(t.Params), jen.Id("opts").Op("...").Qual(ir.BatchPath, "Option")).
				Params(jen.Index().Op("*").Id(t.Result), jen.Error()).Block(
				jen.Return(jen.Qual(ir.ClientPath, "RunBatch").Call(jen.Id("ctx"), rt.Clone(), taskRef(t), jen.Id("ps"), decode.Clone(), jen.Id("opts").Op("...")))))
	}
	if t.Stream != "" {
		g.add(docComment(fmt.Sprintf("%s starts a realtime session of task %q on the server, its chunks streamed as Server-Sent Events, as Client.%s does in-process.", t.Stream, t.Spec.TaskID, t.Stream)),
			jen.Func().Params(c.Clone()).Id(t.Stream).Params(ctx.Clone(), jen.Id("p").Id(t.Params), jen.Id("opts").Op("...").Qual(ir.StreamPath, "Option")).
				Params(jen.Op("*").Qual(ir.StreamPath, "Session"), jen.Error()).Block(
				jen.Return(jen.Qual(ir.ClientPath, "RunStream").Call(jen.Id("ctx"), rt.Clone(), taskRef(t), jen.Op("&").Id("p"), jen.Id("opts").Op("...")))))
	}
}

// callOpts is the per-call options parameter of a task method.
func callOpts() jen.Code {
	return jen.Id("opts").Op("...").Qual(ir.ClientPath, "CallOption")
}
