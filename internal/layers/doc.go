// Package layers holds no code: its tests keep docs/ARCHITECTURE.md's
// layer table true (every package of the module has a row, and a package
// imports only packages of its own layer or the layers below it) and
// docs/DEVELOPMENT.md's list of fuzz targets.
package layers
