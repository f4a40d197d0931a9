// Package e2e holds the end-to-end tests of wfgen: a manifest is compiled
// with the wfgen command into a fresh module, a program that uses the
// generated client is built and run against the real libtorch engine, and
// its outputs are compared with direct engine calls.
package e2e
