package rowscan

// Rows is what both drivers' result sets offer: *sql.Rows and pgx.Rows.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}
