// Package diff decides, without any I/O, whether a live Kubernetes object
// needs a server-side apply to match the object recond read from Git.
//
// The comparison follows what server-side apply would do rather than a plain
// deep-equal:
//
//   - Only fields the desired object sets are compared. Fields the API server
//     defaulted, and fields other managers own (an extra label, an extra list
//     item), are not differences. A desired zero value ("", false, 0, {} or [])
//     equals an absent live field.
//   - Values are canonicalised by the field's type, as the server's schema
//     tells it (Options.Types): numbers compare numerically (1 == 1.0),
//     resource quantities as quantities ("0.5" == "500m", 30000 == "30k"),
//     durations by value ("1m" == "60s"), and an int-or-string keeps its
//     type (80 != "80"). Without a schema for a kind, quantities are known
//     by field name (under limits, requests and hard; sizeLimit, storage).
//   - Lists of maps are matched by key (name, or a well-known merge key such
//     as containerPort) when the desired items all carry it, else by index;
//     lists of scalars compare whole.
//   - The live object's managedFields entry for recond's Apply shows what
//     recond owns: an owned field the desired object no longer sets is a
//     difference, because applying removes it.
//
// A difference made only of desired fields that are absent from the live
// object is marked Uncertain: the server may have transformed them (Secret
// stringData becomes data), so the caller confirms with a server-side dry-run
// and checks the result with Equivalent.
//
// A Secret's values never leave the package: in every difference under data
// or stringData the values are replaced by a salted hash (see FieldDiff), and
// a Change renders, logs and marshals without its Desired and Live objects.
package diff
