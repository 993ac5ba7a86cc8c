package main

import (
	"context"
	"fmt"
	"os"

	"plait/protocol/abi"
	"plait/protocol/wire"
	"plait/shells/wasm/host"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: coreinfo CORE.wasm")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "coreinfo:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ctx := context.Background()
	mod, err := host.Load(ctx, b, "")
	if err != nil {
		return err
	}
	defer mod.Close(ctx)
	in, err := mod.Instantiate(ctx)
	if err != nil {
		return err
	}
	var batch abi.Batch
	if err := batch.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "coreinfo", Origin: wire.OriginID{1}}); err != nil {
		return err
	}
	out, err := in.Step(ctx, batch.Bytes())
	if err != nil {
		return err
	}
	recs, err := abi.Split(out)
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Kind != abi.KindStatus {
		return fmt.Errorf("no STATUS record: %v", err)
	}
	var st abi.StatusMsg
	if err := abi.Unmarshal(recs[len(recs)-1].Payload, &st); err != nil {
		return err
	}
	if !st.Configured || st.MinVersion == 0 {
		return fmt.Errorf("the module did not configure a session: %+v", st)
	}
	fmt.Printf("abi %d\nversions %d..%d\n", mod.ABIVersion(), st.MinVersion, st.MaxVersion)
	return nil
}
