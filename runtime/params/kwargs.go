package params

// List converts a list field to the engine's list form ([]any).
func List[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// StringList converts a list field of a choice type to the engine's list
// form ([]any of string).
func StringList[T ~string](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}
