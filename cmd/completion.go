package cmd

import (
	"github.com/spf13/cobra"
)

func newCompletionCmd(f *factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Generate the shell completion script",
		Long: `Generate the completion script for your shell. Completion covers commands, flags and
the values of enum flags (-o, --auth, --log-level, ...); it never contacts an account.`,
		Example: `  # bash, current shell
  source <(cfp completion bash)
  # bash, permanently (Linux)
  cfp completion bash > /etc/bash_completion.d/cfp
  # zsh
  cfp completion zsh > "${fpath[1]}/_cfp"
  # fish
  cfp completion fish > ~/.config/fish/completions/cfp.fish
  # PowerShell
  cfp completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
		RunE: func(c *cobra.Command, args []string) error {
			out := f.IO.Out
			root := c.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			default:
				return root.GenPowerShellCompletionWithDesc(out)
			}
		},
	}
	return c
}
