// Package chartspec holds what the loop says of a Helm chart without
// linking Helm: the chart's flags (Options), what a render of a chart is
// asked besides the chart (Request, which crosses a render worker's pipe),
// what the status page says of one (Chart), the file that makes a
// directory a chart (File) and the error of a random function with no
// seed (ErrNoSeed). Package helm, in the render binary, renders charts.
package chartspec
