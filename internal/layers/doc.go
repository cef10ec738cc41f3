// Package layers holds no code: its test keeps docs/ARCHITECTURE.md's
// layer table true. Every package of the module has a row, and a package
// imports only packages of its own layer or the layers below it.
package layers
