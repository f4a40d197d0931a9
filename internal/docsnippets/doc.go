// Package docsnippets holds the tests that keep the README and the docs
// honest.
//
// TestSnippetsBuild type-checks the Go code of README.md and every page
// under docs/ against this module's packages. A ```go block is a whole file
// (it has a package clause), or declarations, or statements (built as the
// body of a function returning error), after optional imports; the test
// adds the imports its selectors name. An HTML comment right before a
// block can say more:
//
//	<!-- go-context
//	var ctx context.Context
//	var items []Item
//	-->
//
// declares what the block uses without showing it (the declarations are
// built with the block), and
//
//	<!-- fragment: why -->
//
// leaves a block that cannot build here out, saying why. A snippet that
// stops compiling fails the test at its page and line.
//
// TestLinksResolve checks every relative link of the README, the changelog
// and the docs (the file exists; an anchor into a page names one of its
// headings), and TestDocPathsExist every docs/….md path that code, scripts
// and pages mention.
package docsnippets
