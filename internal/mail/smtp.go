package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// SMTP sends messages to one SMTP server.
type SMTP struct {
	addr     string // host:port
	host     string
	implicit bool // smtps: TLS from the first byte
	user     string
	password string
	// Timeout bounds one delivery when ctx has no earlier deadline.
	Timeout time.Duration
}

// NewSMTP parses smtp://[user:password@]host[:port] (port 25 by default,
// STARTTLS when the server offers it) or smtps://... (port 465).
func NewSMTP(raw string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse smtp url: %w", err)
	}
	s := &SMTP{host: u.Hostname(), Timeout: 30 * time.Second}
	port := u.Port()
	switch u.Scheme {
	case "smtp":
		if port == "" {
			port = "25"
		}
	case "smtps":
		s.implicit = true
		if port == "" {
			port = "465"
		}
	default:
		return nil, fmt.Errorf("smtp url: scheme %q, want smtp or smtps", u.Scheme)
	}
	if s.host == "" {
		return nil, errors.New("smtp url: missing host")
	}
	if u.User != nil {
		s.user = u.User.Username()
		s.password, _ = u.User.Password()
	}
	s.addr = net.JoinHostPort(s.host, port)
	return s, nil
}

// Send delivers m. Connection and protocol failures are returned as is
// (worth retrying); a 5xx reply wraps ErrRejected.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	body, err := render(m)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok && s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("connect to smtp server %s: %w", s.addr, err)
	}
	// net/smtp knows no context: a deadline and a close on cancel stand in.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if s.implicit {
		conn = tls.Client(conn, &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12})
	}
	if err := s.deliver(conn, m, body); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("send mail via %s: %w (%w)", s.addr, ctxErr, err)
		}
		var te *textproto.Error
		if errors.As(err, &te) && te.Code >= 500 {
			return fmt.Errorf("send mail via %s: %w: %w", s.addr, ErrRejected, err)
		}
		return fmt.Errorf("send mail via %s: %w", s.addr, err)
	}
	return nil
}

func (s *SMTP) deliver(conn net.Conn, m Message, body []byte) error {
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return err
	}
	defer c.Close()
	if !s.implicit {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(&tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}); err != nil {
				return fmt.Errorf("starttls: %w", err)
			}
		}
	}
	if s.user != "" {
		// PlainAuth refuses to send the password unencrypted except to
		// localhost.
		if err := c.Auth(smtp.PlainAuth("", s.user, s.password, s.host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return err
	}
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	for _, to := range m.To {
		if err := c.Rcpt(to); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// render builds the RFC 5322 message: headers, then the text as UTF-8
// quoted-printable with CRLF line ends.
func render(m Message) ([]byte, error) {
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return nil, fmt.Errorf("%w: from address: %w", ErrInvalidMessage, err)
	}
	h("From", from.String())
	h("To", strings.Join(m.To, ", "))
	h("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	h("Message-ID", "<"+m.ID+">")
	if m.Date != nil {
		h("Date", m.Date.Format(time.RFC1123Z))
	}
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(m.Text)); err != nil {
		return nil, fmt.Errorf("encode mail body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return nil, fmt.Errorf("encode mail body: %w", err)
	}
	return b.Bytes(), nil
}
