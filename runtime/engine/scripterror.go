package engine

// ScriptError is a failure raised inside a model's code (a TorchScript
// method): the interpreter's final line, and the whole traceback it
// printed. An engine returns it wrapped in its own error, whose message
// keeps only Message, so that an error stays one line (a batch that lists
// failed items stays readable); the traceback is one errors.As away:
//
//	var se *engine.ScriptError
//	if errors.As(err, &se) {
//		log.Print(se.Traceback)
//	}
type ScriptError struct {
	// Message is the final line of the interpreter's report, for example
	// "RuntimeError: AssertionError: value out of range".
	Message string
	// Traceback is the interpreter's whole report: the tracebacks through
	// the serialized and the original code, then the final line.
	Traceback string
}

// Error returns Message.
func (e *ScriptError) Error() string { return e.Message }
