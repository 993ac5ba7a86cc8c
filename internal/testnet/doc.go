// Package testnet owns what tests share about the loopback network.
//
// # The jobs, by file
//
// testnet.go holds them all: FreeAddr, a loopback address whose port was free.
package testnet
