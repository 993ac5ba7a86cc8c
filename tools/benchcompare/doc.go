// Command benchcompare pairs the tables of plait bench of two builds, run in alternated
// rounds (make bench-compare, scripts/bench-compare.sh): for each measure either build
// prints, the median of each build's rounds, HEAD's ratio to the base and the range of the
// per-round ratios, and whether HEAD is better (a higher rate, a shorter time, a smaller
// size). Measures are paired by name with numbers set aside, an older build's renamed row
// by its alias; a measure only one build prints is absent on the other side.
package main
