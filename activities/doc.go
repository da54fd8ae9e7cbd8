// Package activities holds the Temporal activities of ironflow: thin adapters
// that call the bmc drivers, the pxe boot configuration, the store and the
// agent client, and translate their errors into retryable or non-retryable
// Temporal errors. Business sequencing belongs in workflows, never here.
package activities
