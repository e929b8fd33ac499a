package emulator

import (
	"context"
	"embed"
	"io/fs"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/quiver-ingest/quiver/internal/npmdir"
)

//go:embed azurite/package.json azurite/package-lock.json
var azuriteFiles embed.FS

// Azurite's well-known development account: its documented name and key,
// which every Azurite accepts (not a secret).
const (
	AzureAccount = "devstoreaccount1"
	AzureKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azure returns the Azurite blob server of this test binary, installing
// it with npm and starting it on first use.
func Azure(t testing.TB) *Store {
	t.Helper()
	return get(t, "azblob", startAzurite)
}

func startAzurite() (*Store, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, &errMissing{"node/npm (Azurite)", err}
		}
	}
	files, err := fs.Sub(azuriteFiles, "azurite")
	if err != nil {
		return nil, err
	}
	dir, err := npmdir.Install(npmdir.Spec{Name: "quiver-azurite", Files: files})
	if err != nil {
		return nil, err
	}
	srv, err := startServer("azurite-blob", func(port int) []string {
		return []string{"node", filepath.Join(dir, "node_modules", "azurite", "dist", "src", "blob", "main.js"),
			"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
			"--inMemoryPersistence", "--silent", "--skipApiVersionCheck", "--disableProductStyleUrl"}
	}, nil)
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1:" + strconv.Itoa(srv.port)
	cred, err := azblob.NewSharedKeyCredential(AzureAccount, AzureKey)
	if err != nil {
		srv.stop()
		return nil, err
	}
	client, err := azblob.NewClientWithSharedKeyCredential("http://"+host+"/"+AzureAccount, cred, nil)
	if err != nil {
		srv.stop()
		return nil, err
	}
	return &Store{
		Scheme:   "azblob",
		Endpoint: "http://" + host + "/" + AzureAccount,
		env:      []string{"AZURE_STORAGE_ACCOUNT=" + AzureAccount, "AZURE_STORAGE_KEY=" + AzureKey},
		query:    url.Values{"protocol": {"http"}, "domain": {host}, "localemu": {"true"}},
		create: func(ctx context.Context, bucket string) error {
			_, err := client.CreateContainer(ctx, bucket, nil)
			return err
		},
		stop: srv.stop,
	}, nil
}
