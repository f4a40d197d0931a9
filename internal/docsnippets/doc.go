// Package docsnippets holds the test that builds the Go code of the README
// and the docs: every ```go block is a whole file (it has a package
// clause) or a run of declarations, which the test puts in a package of
// its own, with the imports its selectors name, and type-checks against
// this module's packages. A snippet that stops compiling fails the test at
// its file and line.
package docsnippets
