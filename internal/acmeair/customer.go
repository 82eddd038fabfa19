package acmeair

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
)

// customer keeps the customers' profiles and their reward miles.
type customer struct {
	st     *store
	signer signer
	log    *slog.Logger

	get, validate, update, addMiles *sql.Stmt
}

// Customer is a customer's profile, with the reference app's JSON names
// (its CustomerInfo). Password is only read, on an update, never sent.
type Customer struct {
	ID              string  `json:"_id"`
	Password        string  `json:"password,omitempty"`
	Status          string  `json:"status"`
	TotalMiles      int64   `json:"total_miles"`
	MilesYTD        int64   `json:"miles_ytd"`
	Address         Address `json:"address"`
	PhoneNumber     string  `json:"phoneNumber"`
	PhoneNumberType string  `json:"phoneNumberType"`
}

// Address is a customer's address (the reference app's AddressInfo).
type Address struct {
	StreetAddress1 string  `json:"streetAddress1"`
	StreetAddress2 *string `json:"streetAddress2"`
	City           string  `json:"city"`
	StateProvince  string  `json:"stateProvince"`
	Country        string  `json:"country"`
	PostalCode     string  `json:"postalCode"`
}

// milesAnswer is updateCustomerTotalMiles' and getrewardmiles' answer (the
// reference app's MilesResponse).
type milesAnswer struct {
	Miles int64 `json:"miles"`
}

const customerSchema = `CREATE TABLE IF NOT EXISTS customer (
	id TEXT PRIMARY KEY, password TEXT NOT NULL, status TEXT NOT NULL,
	total_miles INTEGER NOT NULL, miles_ytd INTEGER NOT NULL,
	street1 TEXT NOT NULL, street2 TEXT, city TEXT NOT NULL, state TEXT NOT NULL,
	country TEXT NOT NULL, postal_code TEXT NOT NULL, phone TEXT NOT NULL, phone_type TEXT NOT NULL)`

const customerColumns = `id, status, total_miles, miles_ytd, street1, street2, city, state, country,
	postal_code, phone, phone_type`

func newCustomer(ctx context.Context, cfg Config) (*Service, error) {
	st, err := openStore(cfg.DataDir, ServiceCustomer, customerSchema)
	if err != nil {
		return nil, err
	}
	c := &customer{st: st, signer: signer{key: cfg.JWTKey}, log: cfg.Log}
	if err := c.load(ctx, cfg.Customers); err != nil {
		st.close()
		return nil, err
	}
	err = st.prepare(map[**sql.Stmt]string{
		&c.get:      "SELECT " + customerColumns + " FROM customer WHERE id = ?",
		&c.validate: "SELECT count(*) FROM customer WHERE id = ? AND password = ?",
		&c.update: `UPDATE customer SET status = ?, total_miles = ?, miles_ytd = ?, street1 = ?, street2 = ?,
			city = ?, state = ?, country = ?, postal_code = ?, phone = ?, phone_type = ?
			WHERE id = ? AND password = ?`,
		&c.addMiles: "UPDATE customer SET total_miles = total_miles + ? WHERE id = ? RETURNING total_miles",
	})
	if err != nil {
		st.close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /customer/byid/{id}", c.byID)
	mux.HandleFunc("POST /customer/byid/{id}", c.updateByID)
	mux.HandleFunc("POST /customer/internal/validateid", c.validateID)
	mux.HandleFunc("POST /customer/internal/updateCustomerTotalMiles/{id}", c.updateTotalMiles)
	mux.HandleFunc("GET /customer/status", status)
	return &Service{name: ServiceCustomer, handler: mux, closers: []func() error{st.close}}, nil
}

// load loads the standard customers into an empty database.
func (c *customer) load(ctx context.Context, n int) error {
	have, err := c.st.count(ctx, "customer")
	if err != nil {
		return fmt.Errorf("count customers: %w", err)
	}
	if have > 0 {
		return nil
	}
	if err := loadCustomers(ctx, c.st.db, n); err != nil {
		return fmt.Errorf("load customers: %w", err)
	}
	c.log.Info("loaded customers", "count", n)
	return nil
}

func (c *customer) find(ctx context.Context, id string) (Customer, error) {
	var k Customer
	a := &k.Address
	err := c.get.QueryRowContext(ctx, id).Scan(&k.ID, &k.Status, &k.TotalMiles, &k.MilesYTD,
		&a.StreetAddress1, &a.StreetAddress2, &a.City, &a.StateProvince, &a.Country, &a.PostalCode,
		&k.PhoneNumber, &k.PhoneNumberType)
	if errors.Is(err, sql.ErrNoRows) {
		return k, errNotFound
	}
	return k, err
}

// byID is GET /customer/byid/{id}: the logged-in customer's profile.
func (c *customer) byID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !authorize(w, r, c.signer, id) {
		return
	}
	k, err := c.find(r.Context(), id)
	if errors.Is(err, errNotFound) {
		http.Error(w, "no customer "+id, http.StatusNotFound)
		return
	}
	if err != nil {
		fail(w, c.log, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, k)
}

// updateByID is POST /customer/byid/{id} with the profile as JSON, its
// password checked as the reference app checks it; it answers the profile
// as stored.
func (c *customer) updateByID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !authorize(w, r, c.signer, id) {
		return
	}
	k, err := decodeCustomer(http.MaxBytesReader(w, r.Body, maxFormBytes))
	if err != nil {
		fail(w, c.log, http.StatusBadRequest, err)
		return
	}
	if k.ID != id {
		http.Error(w, "forbidden: the profile is "+k.ID+"'s, not "+id+"'s", http.StatusForbidden)
		return
	}
	a := k.Address
	res, err := c.update.ExecContext(r.Context(), k.Status, k.TotalMiles, k.MilesYTD, a.StreetAddress1,
		a.StreetAddress2, a.City, a.StateProvince, a.Country, a.PostalCode, k.PhoneNumber, k.PhoneNumberType,
		k.ID, k.Password)
	if err != nil {
		fail(w, c.log, http.StatusInternalServerError, err)
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		http.Error(w, "wrong customer or password", http.StatusForbidden)
		return
	}
	stored, err := c.find(r.Context(), id)
	if err != nil {
		fail(w, c.log, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, stored)
}

// decodeCustomer reads a profile as POST /customer/byid sends it.
func decodeCustomer(r io.Reader) (Customer, error) {
	var k Customer
	dec := json.NewDecoder(r)
	if err := dec.Decode(&k); err != nil {
		return k, fmt.Errorf("profile: %w", err)
	}
	if k.ID == "" || k.Password == "" || k.Status == "" {
		return k, errors.New("profile: _id, password and status are required")
	}
	return k, nil
}

// validateID is POST /customer/internal/validateid (login, password): auth's
// call at login. Internal calls carry no token, as in the reference app.
func (c *customer) validateID(w http.ResponseWriter, r *http.Request) {
	if err := readForm(w, r); err != nil {
		fail(w, c.log, http.StatusBadRequest, err)
		return
	}
	v, err := requiredForm(r, "login", "password")
	if err != nil {
		fail(w, c.log, http.StatusBadRequest, err)
		return
	}
	var n int
	if err := c.validate.QueryRowContext(r.Context(), v[0], v[1]).Scan(&n); err != nil {
		fail(w, c.log, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, validation{Validated: n == 1})
}

// updateTotalMiles is POST /customer/internal/updateCustomerTotalMiles/{id}
// (miles, negative for a cancelled segment): booking's reward update. It
// answers the new total.
func (c *customer) updateTotalMiles(w http.ResponseWriter, r *http.Request) {
	if err := readForm(w, r); err != nil {
		fail(w, c.log, http.StatusBadRequest, err)
		return
	}
	v, err := requiredForm(r, "miles")
	if err != nil {
		fail(w, c.log, http.StatusBadRequest, err)
		return
	}
	miles, err := strconv.ParseInt(v[0], 10, 32)
	if err != nil {
		fail(w, c.log, http.StatusBadRequest, fmt.Errorf("miles %q is not a whole number", v[0]))
		return
	}
	var total int64
	err = c.addMiles.QueryRowContext(r.Context(), miles, r.PathValue("id")).Scan(&total)
	if errors.Is(err, sql.ErrNoRows) {
		http.Error(w, "no customer "+r.PathValue("id"), http.StatusNotFound)
		return
	}
	if err != nil {
		fail(w, c.log, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, milesAnswer{Miles: total})
}
