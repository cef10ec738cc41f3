// Package message is evfwd's event model: the six client calls, their
// validation and size rules, timestamps, destination selection, and Raw, a
// decoded message that carries user data without touching it. The JSON
// underneath (scanning, ordered objects, encoding) is pkg/rawjson's.
package message
