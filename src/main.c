/* flextopo-extender entry point: everything lives in src/app (ft_app_main). */
int ft_app_main(int argc, char **argv);

int main(int argc, char **argv)
{
	return ft_app_main(argc, argv);
}
