// Package doccheck holds the tests of the documents: every document that
// the repository's Go files and markdown files cite must be in the
// repository, and the package table of docs/design.md must list every
// package with the first sentence of its doc comment
// (TestDesignListsEveryPackage, TestPackageTableIsTheDocComments).
//
// A person who clones the repository has only what is in it, so a comment
// that points at a design document kept elsewhere, or a markdown link to a
// sibling folder of the checkout, is a dead end. The test scans every *.go
// and *.md file from the module root (skipping .git, testdata and hidden
// folders) and fails on:
//
//   - a markdown file name mentioned in Go or markdown text (for example
//     docs/design.md, README.md) that exists neither relative to the citing
//     file nor relative to the module root;
//   - a relative markdown link [text](path) whose target does not exist, or
//     whose #fragment names no heading of the target markdown file;
//   - any reference that leaves the repository (a path that climbs above the
//     module root).
//
// The design lives in docs/design.md; see docs/testing.md.
package doccheck
