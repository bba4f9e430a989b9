package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the credentials the control plane is started with.
type PKI struct {
	CAPEM      []byte // CA certificate that signed the apiserver serving cert
	servingCrt string // apiserver --tls-cert-file
	servingKey string // apiserver --tls-private-key-file
	saKey      string // service-account signing key (RSA, PKCS#1)
	tokenFile  string // --token-auth-file
	Token      string // admin bearer token (group system:masters)
}

// ServingCert is the certificate and key files kube-apiserver serves with:
// valid for 127.0.0.1 and signed by CAPEM, so another server on loopback
// that kube-apiserver calls (an admission webhook) may serve them too.
func (p *PKI) ServingCert() (certFile, keyFile string) { return p.servingCrt, p.servingKey }

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// generatePKI writes a throw-away CA, an apiserver serving certificate for
// 127.0.0.1/localhost signed by it, a service-account key and a static token
// file into dir.
func generatePKI(dir string) (*PKI, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "flextopo-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}

	token, err := randomHex(16)
	if err != nil {
		return nil, err
	}

	p := &PKI{
		CAPEM:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		servingCrt: filepath.Join(dir, "apiserver.crt"),
		servingKey: filepath.Join(dir, "apiserver.key"),
		saKey:      filepath.Join(dir, "sa.key"),
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		Token:      token,
	}
	if err := writePEM(p.servingCrt, "CERTIFICATE", srvDER); err != nil {
		return nil, err
	}
	if err := writePEM(p.servingKey, "EC PRIVATE KEY", srvKeyDER); err != nil {
		return nil, err
	}
	if err := writePEM(p.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), p.CAPEM, 0o600); err != nil {
		return nil, err
	}
	// token,user,uid,"group1,group2"
	line := fmt.Sprintf("%s,flextopo-e2e-admin,flextopo-e2e-admin,\"system:masters\"\n", token)
	if err := os.WriteFile(p.tokenFile, []byte(line), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}
